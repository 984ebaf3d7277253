"""fedeval: evaluate and calibrate classifiers on labelled data that stays with its owners.

The public names below load on first use (PEP 562), so `import fedeval` and the `fedeval`
command's `--version`, `--help` and shell completion do not pay for numpy, pandas, pyarrow
and scipy; `from fedeval import evaluate` works as before.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from fedeval.api.calibrate import (
        CalibrationResult,
        apply_map_file,
        calibrate,
        calibrate_file,
    )
    from fedeval.api.compare import Comparison, compare
    from fedeval.api.curves import CurveResult, roc_pr_curves, roc_pr_curves_file
    from fedeval.api.evaluate import (
        Evaluation,
        ThresholdMetrics,
        evaluate,
        evaluate_file,
    )
    from fedeval.api.inputs import ReadOptions
    from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape
    from fedeval.core.errors import (
        FedevalError,
        GateFailed,
        InputError,
        ReleaseError,
        UsageError,
    )
    from fedeval.core.release import Release, ScoreHistogram
    from fedeval.core.results import Estimate
    from fedeval.core.spec import ReleaseSpec
    from fedeval.core.version import __version__
    from fedeval.privacy.ledger import BudgetExceeded, Ledger

# Each public name -> the module that defines it (loaded by `__getattr__` on first use).
_SOURCES: dict[str, str] = {
    "CalibrationResult": "fedeval.api.calibrate",
    "apply_map_file": "fedeval.api.calibrate",
    "calibrate": "fedeval.api.calibrate",
    "calibrate_file": "fedeval.api.calibrate",
    "Comparison": "fedeval.api.compare",
    "compare": "fedeval.api.compare",
    "CurveResult": "fedeval.api.curves",
    "roc_pr_curves": "fedeval.api.curves",
    "roc_pr_curves_file": "fedeval.api.curves",
    "Estimate": "fedeval.core.results",
    "Evaluation": "fedeval.api.evaluate",
    "ThresholdMetrics": "fedeval.api.evaluate",
    "evaluate": "fedeval.api.evaluate",
    "evaluate_file": "fedeval.api.evaluate",
    "ReadOptions": "fedeval.api.inputs",
    "PrivacyConfig": "fedeval.core.config",
    "PrivacyModel": "fedeval.core.config",
    "Shape": "fedeval.core.config",
    "FedevalError": "fedeval.core.errors",
    "GateFailed": "fedeval.core.errors",
    "InputError": "fedeval.core.errors",
    "ReleaseError": "fedeval.core.errors",
    "UsageError": "fedeval.core.errors",
    "Release": "fedeval.core.release",
    "ScoreHistogram": "fedeval.core.release",
    "ReleaseSpec": "fedeval.core.spec",
    "__version__": "fedeval.core.version",
    "BudgetExceeded": "fedeval.privacy.ledger",
    "Ledger": "fedeval.privacy.ledger",
}

__all__ = [
    "BudgetExceeded",
    "CalibrationResult",
    "Comparison",
    "CurveResult",
    "Estimate",
    "Evaluation",
    "FedevalError",
    "GateFailed",
    "InputError",
    "Ledger",
    "PrivacyConfig",
    "PrivacyModel",
    "ReadOptions",
    "Release",
    "ReleaseError",
    "ReleaseSpec",
    "ScoreHistogram",
    "Shape",
    "ThresholdMetrics",
    "UsageError",
    "__version__",
    "apply_map_file",
    "calibrate",
    "calibrate_file",
    "compare",
    "evaluate",
    "evaluate_file",
    "roc_pr_curves",
    "roc_pr_curves_file",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first access and keep it in the package's dict."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
