"""fedeval: evaluate and calibrate classifiers on labelled data that stays with its owners."""

from fedeval.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.errors import FedevalError, GateFailed, InputError, ReleaseError, UsageError
from fedeval.evaluate import Estimate, Evaluation, ThresholdMetrics, evaluate, evaluate_file
from fedeval.release import Release, ScoreHistogram

__version__ = "0.1.0"

__all__ = [
    "Estimate",
    "Evaluation",
    "FedevalError",
    "GateFailed",
    "InputError",
    "PrivacyConfig",
    "PrivacyModel",
    "Release",
    "ReleaseError",
    "ScoreHistogram",
    "Shape",
    "ThresholdMetrics",
    "UsageError",
    "__version__",
    "evaluate",
    "evaluate_file",
]
