"""fedeval: evaluate and calibrate classifiers on labelled data that stays with its owners."""

from fedeval.api.calibrate import CalibrationResult, apply_map_file, calibrate, calibrate_file
from fedeval.api.compare import Comparison, compare  # noqa: F401  (public, as fedeval.compare)
from fedeval.api.curves import CurveResult, roc_pr_curves, roc_pr_curves_file
from fedeval.api.evaluate import Estimate, Evaluation, ThresholdMetrics, evaluate, evaluate_file
from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.core.errors import FedevalError, GateFailed, InputError, ReleaseError, UsageError
from fedeval.core.release import Release, ScoreHistogram
from fedeval.core.version import __version__
from fedeval.privacy.ledger import BudgetExceeded, Ledger

__all__ = [
    "BudgetExceeded",
    "CalibrationResult",
    "CurveResult",
    "Estimate",
    "Evaluation",
    "FedevalError",
    "GateFailed",
    "InputError",
    "Ledger",
    "PrivacyConfig",
    "PrivacyModel",
    "Release",
    "ReleaseError",
    "ScoreHistogram",
    "Shape",
    "ThresholdMetrics",
    "UsageError",
    "__version__",
    "apply_map_file",
    "calibrate",
    "calibrate_file",
    "evaluate",
    "evaluate_file",
    "roc_pr_curves",
    "roc_pr_curves_file",
]
