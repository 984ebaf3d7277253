"""The privacy models of the binary release, by name: one line per model.

Each value is a module of `fedeval.privacy` that implements `fedeval.privacy.base.ReleaseModel`
(mypy checks each against the protocol here). Adding a model is one module and one line
(ARCHITECTURE.md, "Where to add things"), plus its name in `fedeval.core.config.PrivacyModel`.
"""

from __future__ import annotations

from fedeval.core.config import PrivacyModel
from fedeval.core.errors import UsageError
from fedeval.privacy import distdp, federated, localdp
from fedeval.privacy.base import ReleaseModel

MODELS: dict[PrivacyModel, ReleaseModel] = {
    PrivacyModel.FEDERATED: federated,
    PrivacyModel.DISTDP: distdp,
    PrivacyModel.LOCALDP: localdp,
}


def model_of(model: PrivacyModel | str) -> ReleaseModel:
    """The module that implements `model` (a `UsageError` naming the choices if unknown)."""
    try:
        return MODELS[PrivacyModel(model)]
    except (ValueError, KeyError):
        choices = ", ".join(m.value for m in MODELS)
        raise UsageError(f"unknown privacy model {model!r}; choose one of {choices}.") from None
