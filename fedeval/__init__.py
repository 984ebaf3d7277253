"""fedeval: evaluate and calibrate classifiers on labelled data that stays with its owners."""

from fedeval.calibration import CalibrationResult, apply_map_file, calibrate, calibrate_file
from fedeval.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.curves import CurveResult, roc_pr_curves, roc_pr_curves_file
from fedeval.errors import FedevalError, GateFailed, InputError, ReleaseError, UsageError
from fedeval.evaluate import Estimate, Evaluation, ThresholdMetrics, evaluate, evaluate_file
from fedeval.ledger import BudgetExceeded, Ledger
from fedeval.release import Release, ScoreHistogram

__version__ = "0.1.0"

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
