"""The privacy models behind one protocol: every registered module implements
`fedeval.privacy.base.ReleaseModel`, and the claim every document states is asked of the
registered module (so a new model is one module and one registry line)."""

from __future__ import annotations

import inspect
import types

import numpy as np
import pytest

from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.core.errors import UsageError
from fedeval.privacy import base, distdp, registry
from fedeval.privacy.events import NoNoiseEvent, PureEvent
from fedeval.privacy.gaussian import GaussianMechanism
from fedeval.privacy.mechanism import Mechanism

MEMBERS = sorted(
    name
    for name, _ in inspect.getmembers(base.ReleaseModel)
    if not name.startswith("_") or name == "TRAITS"
)


@pytest.mark.parametrize("model", list(PrivacyModel), ids=str)
def test_every_model_is_registered_and_implements_the_protocol(model):
    module = registry.model_of(model)
    assert module.TRAITS.model is model
    missing = [name for name in MEMBERS if not hasattr(module, name)]
    assert missing == [], f"{module.__name__} lacks {missing}"
    for name in MEMBERS:
        protocol = getattr(base.ReleaseModel, name)
        if inspect.isfunction(protocol):
            want = list(inspect.signature(protocol).parameters)[1:]  # without self
            have = list(inspect.signature(getattr(module, name)).parameters)
            assert have[: len(want)] == want, (module.__name__, name, have)


def test_an_unknown_model_is_refused_by_name():
    with pytest.raises(UsageError, match="unknown privacy model 'gauss'"):
        registry.model_of("gauss")


def test_the_claim_is_asked_of_the_registered_module(monkeypatch):
    # A model registered in place of distdp: the mechanism's section states what that module
    # says (claim, parameters, DP event), with no branch on the model elsewhere.
    stand_in = types.ModuleType("stand_in")
    for name in MEMBERS:
        setattr(stand_in, name, getattr(distdp, name))
    stand_in.claim = lambda mech: "the stand-in's claim"
    stand_in.parameters = lambda mech: {"name": "stand-in noise"}
    stand_in.event = lambda mech: PureEvent(0.25)
    monkeypatch.setitem(registry.MODELS, PrivacyModel.DISTDP, stand_in)
    section = Mechanism(PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.HIERARCHY, 1.0)).section()
    assert section["guarantee"] == "the stand-in's claim"
    assert section["mechanism"] == {"name": "stand-in noise"}
    assert section["dp_event"] == {"type": "pure", "epsilon": 0.25}
    # A seed marks any model that adds noise as a simulation.
    seeded = Mechanism(PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.HIERARCHY, 1.0), seeded=True)
    assert seeded.guarantee().startswith("reproducible simulation (--seed): NOT private")


def test_both_claims_have_the_shape_every_document_reads():
    binary = Mechanism(PrivacyConfig(PrivacyModel.FEDERATED, 3, Shape.FLAT))
    gaussian = GaussianMechanism(None)
    for claim in (binary, gaussian):
        for name in ("neighbouring", "parameters", "event", "dp_event", "guarantee",
                     "server_learns", "analyst_learns", "section", "seeded"):  # fmt: skip
            assert hasattr(claim, name)
        assert claim.event() == NoNoiseEvent()
        assert claim.section().keys() >= {"model", "epsilon", "dp_event", "guarantee"}


def test_flags_say_what_the_protocol_does_with_each_model():
    fed, dist, loc = (registry.model_of(m) for m in ("federated", "distdp", "localdp"))
    flags = [
        (t.adds_noise, t.masked, t.shares_noise) for t in (fed.TRAITS, dist.TRAITS, loc.TRAITS)
    ]
    assert flags == [(False, True, False), (True, True, True), (True, False, False)]
    cfg = PrivacyConfig(PrivacyModel.LOCALDP, 3, Shape.HIERARCHY, 1.0)
    assert loc.report_bytes(cfg) == pytest.approx(
        np.mean([1 + ((2 << k) + 7) // 8 for k in (1, 2, 3)])
    )
