"""DP events as frozen records (`fedeval.privacy.events`) and the one accountant
(`fedeval.privacy.accounting`): every mechanism's event round-trips through its document's dict
unchanged, malformed events are refused with one clear line, and the ledger, the multiclass
calibration and the comparison compose through the same code."""

from __future__ import annotations

import math

import pytest

from fedeval.core.config import PrivacyConfig, PrivacyModel, Relation, Shape, Unit
from fedeval.core.errors import UsageError
from fedeval.privacy import accounting
from fedeval.privacy.events import (
    ComposedEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    NoNoiseEvent,
    PureEvent,
    event_from_dict,
)
from fedeval.privacy.gaussian import GaussianMechanism, dp_statement
from fedeval.privacy.mechanism import Mechanism


def _configs() -> list[PrivacyConfig]:
    out = [PrivacyConfig(PrivacyModel.FEDERATED, 4, Shape.HIERARCHY)]
    for model in (PrivacyModel.DISTDP, PrivacyModel.LOCALDP):
        for relation in (Relation.ADD_REMOVE, Relation.REPLACE):
            if model is PrivacyModel.LOCALDP and relation is Relation.ADD_REMOVE:
                continue  # localdp is stated under replace only
            for unit, cap in ((Unit.EXAMPLE, None), (Unit.CLIENT, 3)):
                for share in (0.0, 0.05):
                    out.append(
                        PrivacyConfig(
                            model, 5, Shape.HIERARCHY, 1.5, unit, cap, relation, probe_share=share
                        )
                    )
    out.append(
        PrivacyConfig(
            PrivacyModel.DISTDP, 3, Shape.FLAT, 2.0, colluders=2, cohort_floor=10, probe_share=0.1
        )
    )
    return out


@pytest.mark.parametrize("config", _configs(), ids=lambda c: f"{c.model.value}-{c.relation}")
def test_every_binary_event_round_trips_through_its_document(config):
    mech = Mechanism(config)
    stored = mech.section()["dp_event"]
    assert event_from_dict(stored) == mech.event()
    assert event_from_dict(stored).to_dict() == stored


def test_distdp_event_is_the_discrete_laplace_the_claim_states():
    # h = 5 released levels 1..5, unit client L = 3, replace: Δ = 2·5·3 = 30; probe Δ = 2·3.
    cfg = PrivacyConfig(
        PrivacyModel.DISTDP, 5, Shape.HIERARCHY, 2.0, Unit.CLIENT, 3, Relation.REPLACE, 0.05
    )
    event = Mechanism(cfg).event()
    assert event == ComposedEvent(
        (DiscreteLaplaceEvent(2.0 * 0.05 / 6, 6), DiscreteLaplaceEvent(2.0 * 0.95 / 30, 30))
    )
    assert accounting.compose([event], 0.0) == pytest.approx(2.0, rel=1e-12)
    colluded = PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.FLAT, 1.0, colluders=1, cohort_floor=4)
    assert Mechanism(colluded).dp_event() == {
        "type": "discrete_laplace", "parameter": 1.0, "sensitivity": 1, "colluders": 1,
    }  # fmt: skip


def test_gaussian_event_round_trips_and_is_what_was_calibrated():
    st = dp_statement(
        1.0, 1e-5, releases=6, clip={"positive": 10.0, "negative": 50.0}, rounds=1,
        participation=1.0, per_round=6,
    )  # fmt: skip
    mech = GaussianMechanism(st)
    assert mech.event() == GaussianEvent(st.noise_multiplier, 6)
    assert event_from_dict(mech.section()["dp_event"]) == mech.event()
    # The calibration's ε never exceeds the target, and the ledger's accountant (a superset of
    # the calibration's Rényi orders) charges at most that.
    assert accounting.gaussian_epsilon(st.noise_multiplier, 6, 1e-5) <= 1.0
    assert accounting.compose([mech.event()], 1e-5) <= 1.0
    assert GaussianMechanism(None).event() == NoNoiseEvent()


def test_composition_sums_pure_events_exactly_and_refuses_no_noise():
    events = [PureEvent(0.5), DiscreteLaplaceEvent(0.25, 2), ComposedEvent((PureEvent(0.25),))]
    assert accounting.compose(events, 0.0) == math.fsum([0.5, 0.5, 0.25])
    assert accounting.is_pure(events)
    assert not accounting.is_pure([*events, GaussianEvent(3.0, 2)])
    with pytest.raises(UsageError, match="adds no noise"):
        accounting.compose([PureEvent(1.0), ComposedEvent((NoNoiseEvent(),))], 0.0)
    with pytest.raises(UsageError, match="no finite ε at δ = 0"):
        accounting.compose([GaussianEvent(3.0)], 0.0)


@pytest.mark.parametrize(
    "event,message",
    [
        (None, "must be an object with a 'type'"),
        ({"type": "laplace"}, "unknown type 'laplace'"),
        ({"type": "discrete_laplace", "parameter": 1.0, "sensitivity": 0}, "positive integer"),
        ({"type": "discrete_laplace", "parameter": math.nan, "sensitivity": 1}, "finite"),
        ({"type": "discrete_laplace", "parameter": -1.0, "sensitivity": 1}, "must be > 0"),
        (
            {"type": "discrete_laplace", "parameter": 1.0, "sensitivity": 1, "colluders": -1},
            "colluders must be an integer ≥ 0",
        ),
        ({"type": "pure", "epsilon": 0}, "must be > 0"),
        ({"type": "gaussian", "noise_multiplier": 1.0, "count": 0}, "positive integer"),
        ({"type": "gaussian", "noise_multiplier": True}, "finite number"),
        ({"type": "composed", "events": []}, "non-empty list"),
        ({"type": "composed", "events": [{"type": "pure"}]}, "pure epsilon"),
    ],
)
def test_malformed_events_are_refused_with_one_line(event, message):
    with pytest.raises(UsageError, match=message):
        event_from_dict(event)


def test_lenient_where_older_documents_were():
    # A whole-number float Δ is an integer; a Gaussian without a count is one release.
    assert event_from_dict(
        {"type": "discrete_laplace", "parameter": 0.5, "sensitivity": 3.0}
    ) == DiscreteLaplaceEvent(0.5, 3)
    assert event_from_dict({"type": "gaussian", "noise_multiplier": 2.0}) == GaussianEvent(2.0, 1)


def test_describe_for_the_ledger_table():
    assert (
        accounting.describe_event(
            ComposedEvent((DiscreteLaplaceEvent(0.1, 2), GaussianEvent(1.5, 4))).to_dict()
        )
        == "DLap Δ=2 + Gauss z=1.5×4"
    )
    assert accounting.describe_event({"type": "weird"}) == "weird"
    assert accounting.describe_event(None) == "?"
