"""The privacy budget ledger v2: stored budget, per-dataset totals of one unit, refusals,
composition (exact Σε for pure DP at any Δ; RDP for Gaussian events) and concurrent runs."""

from __future__ import annotations

import json
import math
import multiprocessing as mp

import numpy as np
import pytest
from dp_accounting import dp_event as E
from dp_accounting import privacy_accountant as PA
from dp_accounting.rdp import rdp_privacy_accountant as rdp
from ledger_race import charge_one

from fedeval.core.errors import InputError, UsageError
from fedeval.privacy.accounting import total_epsilon
from fedeval.privacy.ledger import (
    ENTRY_SCHEMA,
    SCHEMA,
    BudgetExceeded,
    charge,
    make_entry,
    read_ledger,
    totals,
)


def doc(
    epsilon=1.0,
    *,
    sensitivity=8,
    model="distdp",
    unit="example",
    relation="add-remove",
    event=None,
    delta=0.0,
    seeded=False,
):
    if event is None:
        event = {"type": "discrete_laplace", "parameter": epsilon / sensitivity}
        event["sensitivity"] = sensitivity
    return {
        "schema": "fedeval.report/1",
        "fedeval_version": "0.0-test",
        "run": {"seed": 1234, "source": "/secret/path/scores.parquet"},
        "privacy": {
            "model": model,
            "epsilon": epsilon,
            "delta": delta,
            "unit": unit,
            "relation": relation,
            "mechanism": {"name": "m", "sensitivity": sensitivity, "seed": 1234},
            "dp_event": event,
            "reproducible_simulation": seeded,
        },
    }


def entry(epsilon=1.0, dataset="default", **kw):
    return make_entry(doc(epsilon, **kw), command="evaluate", covered="test", dataset=dataset)


def gaussian(z=2.0, count=10, epsilon=3.0, delta=1e-5, **kw):
    event = {"type": "gaussian", "noise_multiplier": z, "count": count}
    kw.setdefault("unit", "client")
    return entry(epsilon, model="multiclass", event=event, delta=delta, **kw)


# dp_accounting's default Rényi orders plus the fine grid the multiclass noise is calibrated on.
ORDERS = sorted(set(rdp.DEFAULT_RDP_ORDERS) | {float(a) for a in 1 + np.geomspace(1e-3, 1e5, 2000)})


def rdp_epsilon(events, delta, orders=ORDERS):
    acc = rdp.RdpAccountant(orders, neighboring_relation=PA.NeighboringRelation.REPLACE_ONE)
    acc.compose(E.ComposedDpEvent(events))
    return acc.get_epsilon(delta)


# --- entries -----------------------------------------------------------------------------------


def test_make_entry_records_the_event_and_no_seed_or_path():
    e = entry(0.5)
    assert e["schema"] == ENTRY_SCHEMA
    assert set(e) == {
        "schema",
        "time",
        "command",
        "covered",
        "dataset",
        "model",
        "unit",
        "relation",
        "epsilon",
        "sampler_delta",
        "delta",
        "dp_event",
        "mechanism",
        "fedeval_version",
    }
    assert e["dataset"] == "default" and e["relation"] == "add-remove"
    assert e["dp_event"] == {"type": "discrete_laplace", "parameter": 0.5 / 8, "sensitivity": 8}
    text = json.dumps(e)
    assert "1234" not in text and "secret" not in text and "seed" not in text
    with pytest.raises(UsageError, match="not a file path"):
        entry(dataset="/data/scores.parquet")


def test_unchargeable_documents_are_refused():
    with pytest.raises(UsageError, match="adds no noise"):
        entry(None, model="federated", event={"type": "none"})
    d = doc()
    del d["privacy"]["dp_event"]
    with pytest.raises(UsageError, match="no dp_event"):
        make_entry(d, command="evaluate", covered="x")
    with pytest.raises(UsageError, match="unknown type 'laplace'"):
        entry(event={"type": "laplace", "scale": 1})
    with pytest.raises(UsageError, match="positive integer"):
        entry(event={"type": "discrete_laplace", "parameter": 0.1, "sensitivity": 0.5})


def test_seeded_runs_are_refused(tmp_path):
    with pytest.raises(UsageError, match="reproducible simulation, not a private release"):
        entry(seeded=True)
    assert not (tmp_path / "l.jsonl").exists()


def test_an_entry_whose_epsilon_disagrees_with_its_event_is_refused(tmp_path):
    e = entry(1.0)
    e["epsilon"] = 0.5  # the noise added is for ε = 1
    with pytest.raises(UsageError, match="disagrees with its dp_event"):
        charge(tmp_path / "l.jsonl", e, budget=5)


# --- budget ------------------------------------------------------------------------------------


def test_budget_is_stored_and_a_different_budget_refused(tmp_path):
    path = tmp_path / "l.jsonl"
    with pytest.raises(UsageError, match="does not exist yet"):
        charge(path, entry(), budget=None)
    assert not path.exists()
    assert charge(path, entry(1.0), budget=2.0) == pytest.approx(1.0)
    header, entries = read_ledger(path)
    assert header["schema"] == SCHEMA and header["budget"] == {"epsilon": 2.0, "delta": 0.0}
    assert header["created"] and len(entries) == 1
    # Later runs use the stored budget; repeating it is fine; a different one is refused.
    assert charge(path, entry(0.5), budget=None) == pytest.approx(1.5)
    assert charge(path, entry(0.25), budget=2.0) == pytest.approx(1.75)
    before = path.read_bytes()
    with pytest.raises(UsageError, match="stores its budget ε = 2, δ = 0"):
        charge(path, entry(0.1), budget=10.0)
    with pytest.raises(UsageError, match="stores its budget"):
        charge(path, entry(0.1), delta=1e-6)
    with pytest.raises(BudgetExceeded, match=r"from ε = 1\.75 to 2\.75, over its budget of 2;"):
        charge(path, entry(1.0))
    assert path.read_bytes() == before
    with pytest.raises(UsageError, match="positive"):
        charge(tmp_path / "m.jsonl", entry(), budget=0.0)


def test_ten_releases_of_a_tenth_fill_a_budget_of_one(tmp_path):
    path = tmp_path / "l.jsonl"
    for i in range(10):
        total = charge(path, entry(0.1, sensitivity=1 + i), budget=1.0)
    assert total == pytest.approx(1.0, abs=1e-9)
    header, entries = read_ledger(path)
    assert totals(header, entries)["default"] == pytest.approx(1.0, abs=1e-9)
    before = path.read_bytes()
    with pytest.raises(BudgetExceeded, match="nothing was released"):
        charge(path, entry(0.1))
    assert path.read_bytes() == before


def test_totals_and_budget_are_per_dataset(tmp_path):
    path = tmp_path / "l.jsonl"
    charge(path, entry(1.5, dataset="a"), budget=2.0)
    # Another dataset (other people) has its own total, and may even use another unit.
    assert charge(path, entry(1.5, dataset="b", unit="client")) == pytest.approx(1.5)
    with pytest.raises(BudgetExceeded, match="dataset 'a'"):
        charge(path, entry(1.0, dataset="a"))
    assert totals(*read_ledger(path)) == {"a": 1.5, "b": 1.5}


# --- one unit per total ------------------------------------------------------------------------


def test_mixed_units_are_refused(tmp_path):
    path = tmp_path / "l.jsonl"
    charge(path, entry(0.5), budget=10.0)
    with pytest.raises(UsageError, match=r"unit example.*unit client"):
        charge(path, entry(0.5, unit="client"))
    assert len(read_ledger(path)[1]) == 1
    with pytest.raises(UsageError, match="one unit of privacy"):
        total_epsilon([entry(0.5), entry(0.5, unit="client")])


def test_mixed_relations_are_refused(tmp_path):
    path = tmp_path / "l.jsonl"
    charge(path, entry(0.5, relation="replace"), budget=10.0)
    with pytest.raises(UsageError, match=r"relation replace.*relation add-remove"):
        charge(path, entry(0.5, relation="add-remove"))
    assert len(read_ledger(path)[1]) == 1


def test_a_refused_charge_leaves_the_ledger_and_its_directory_as_they_were(tmp_path):
    """Refusals that the ledger as it is already decides (over budget, another unit) are judged
    before the lock is taken, so a refused run leaves no lock file behind."""
    path = tmp_path / "l.jsonl"
    charge(path, entry(0.5), budget=1.0)
    (tmp_path / "l.jsonl.lock").unlink(missing_ok=True)  # what a successful charge leaves
    before = sorted(tmp_path.iterdir()), path.read_bytes()
    with pytest.raises(BudgetExceeded):
        charge(path, entry(0.75))
    with pytest.raises(UsageError, match="one unit and one"):
        charge(path, entry(0.25, unit="client"))
    assert (sorted(tmp_path.iterdir()), path.read_bytes()) == before


# --- the file ----------------------------------------------------------------------------------


def test_v1_ledger_is_refused(tmp_path):
    path = tmp_path / "old.jsonl"
    v1 = {"schema": "fedeval.ledger-entry/1", "model": "distdp", "epsilon": 1.0, "seed": 1}
    path.write_text(json.dumps(v1) + "\n")
    for call in (lambda: read_ledger(path), lambda: charge(path, entry(), budget=5)):
        with pytest.raises(InputError, match="version-1") as info:
            call()
        message = str(info.value)
        assert "example-level and client-level" in message and "new ledger" in message
    assert path.read_text() == json.dumps(v1) + "\n"


def test_malformed_ledger(tmp_path):
    path = tmp_path / "l.jsonl"
    charge(path, entry(), budget=5)
    path.write_text(path.read_text() + "{oops\n")
    with pytest.raises(InputError, match="line 3: not valid JSON"):
        read_ledger(path)
    path.write_text('{"schema": "something/1"}\n')
    with pytest.raises(InputError, match="line 1: not a fedeval ledger entry"):
        read_ledger(path)
    path.write_text(json.dumps(entry()) + "\n")
    with pytest.raises(InputError, match="before the ledger header"):
        read_ledger(path)
    path.write_text(json.dumps({"schema": SCHEMA, "budget": {"epsilon": -1, "delta": 0}}) + "\n")
    with pytest.raises(InputError, match="no valid budget"):
        read_ledger(path)
    assert read_ledger(tmp_path / "absent.jsonl") == (None, [])


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda e: e.pop("unit"), "needs its unit"),
        (lambda e: e.update(epsilon=[1.0]), "needs its ε"),
        (lambda e: e.update(delta=[0.0]), "δ must be in"),
        (lambda e: e.update(dp_event="x"), ""),
        (lambda e: e.update(seed=1), "seed or a file path"),
        (lambda e: e.update(relation=" add-remove"), "relation is one of add-remove, replace"),
        (lambda e: e.update(unit="user"), "unit is one of example, client"),
    ],
    ids=[
        "no unit",
        "epsilon a list",
        "delta a list",
        "event a string",
        "a seed",
        "relation misspelt",
        "unknown unit",
    ],
)
def test_an_edited_entry_is_refused_when_read(tmp_path, edit, message):
    # An entry is checked when read, as when charged: a hand-edited one is one line naming the
    # ledger and line, not a crash later in the total or the table.
    path = tmp_path / "l.jsonl"
    charge(path, entry(), budget=5)
    header, line = path.read_text().splitlines()
    e = json.loads(line)
    edit(e)
    path.write_text(f"{header}\n{json.dumps(e)}\n")
    with pytest.raises(InputError, match=f"line 2: .*{message}"):
        read_ledger(path)


# --- composition -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sensitivity",
    [1000, 10**6, 3 * 10**8 * 10],  # the last: --max-examples 3e8 over 10 levels
)
def test_large_sensitivity_gives_the_exact_sum(tmp_path, sensitivity):
    # dp_accounting's PLD accountant returns ∞ at δ = 0 from Δ = 1000 and runs out of memory
    # building the pmf for Δ = 3·10^9; pure ε-DP composes exactly by adding up.
    path = tmp_path / "l.jsonl"
    for eps in (0.3, 0.7, 1.0):
        total = charge(path, entry(eps, sensitivity=sensitivity), budget=3.0)
    assert math.isfinite(total) and total == pytest.approx(2.0, rel=1e-12)
    assert total_epsilon(read_ledger(path)[1]) == pytest.approx(2.0, rel=1e-12)
    with pytest.raises(BudgetExceeded):
        charge(path, entry(1.5, sensitivity=sensitivity))


def test_a_long_ledger_of_pure_releases_stays_exact():
    # 500 small releases (the PLD accountant already reports ∞ at δ = 0 for 100 of them).
    entries = [entry(0.002, sensitivity=1 + i % 7) for i in range(500)]
    assert total_epsilon(entries) == pytest.approx(1.0, rel=1e-12)


def test_small_sensitivity_matches_dp_accountings_pld():
    # Where dp_accounting's PLD represents the discrete Laplace exactly, it agrees with the sum.
    from dp_accounting.pld import pld_privacy_accountant as pld

    acc = pld.PLDAccountant()
    acc.compose(
        E.ComposedDpEvent(
            [
                E.DiscreteLaplaceDpEvent(noise_parameter=0.5 / 8, sensitivity=8),
                E.DiscreteLaplaceDpEvent(noise_parameter=1.0, sensitivity=1),
            ]
        )
    )
    ours = total_epsilon([entry(0.5, sensitivity=8), entry(1.0, sensitivity=1)])
    assert ours == pytest.approx(acc.get_epsilon(0.0), rel=1e-9) == pytest.approx(1.5)


def test_local_dp_and_composed_events_add_up():
    oue = entry(2.0, model="localdp", relation="replace", event={"type": "pure", "epsilon": 2.0})
    both = {
        "type": "composed",
        "events": [{"type": "pure", "epsilon": 0.25}, {"type": "pure", "epsilon": 0.75}],
    }
    composed = entry(1.0, model="localdp", relation="replace", event=both)
    assert total_epsilon([oue, composed]) == pytest.approx(3.0, rel=1e-12)


def test_gaussian_events_compose_by_rdp(tmp_path):
    path = tmp_path / "l.jsonl"
    # A new ledger takes δ from its first Gaussian release unless told.
    first = charge(path, gaussian(z=2.0, count=10), budget=20.0)
    total = charge(path, gaussian(z=1.5, count=4))
    assert read_ledger(path)[0]["budget"] == {"epsilon": 20.0, "delta": 1e-5}
    expected = rdp_epsilon(
        [
            E.SelfComposedDpEvent(E.GaussianDpEvent(2.0), 10),
            E.SelfComposedDpEvent(E.GaussianDpEvent(1.5), 4),
        ],
        1e-5,
    )
    assert math.isfinite(total) and total == pytest.approx(expected, rel=1e-12)
    # The finer grid of orders only tightens dp_accounting's default answer, and barely.
    coarse = rdp_epsilon(
        [
            E.SelfComposedDpEvent(E.GaussianDpEvent(2.0), 10),
            E.SelfComposedDpEvent(E.GaussianDpEvent(1.5), 4),
        ],
        1e-5,
        orders=rdp.DEFAULT_RDP_ORDERS,
    )
    assert coarse * (1 - 0.01) < total <= coarse
    assert first == pytest.approx(
        rdp_epsilon([E.SelfComposedDpEvent(E.GaussianDpEvent(2.0), 10)], 1e-5), rel=1e-12
    )
    # Composition is sub-additive here (RDP), and a composed event is the same as two entries.
    assert total < first + rdp_epsilon([E.SelfComposedDpEvent(E.GaussianDpEvent(1.5), 4)], 1e-5)
    both = {
        "type": "composed",
        "events": [
            {"type": "gaussian", "noise_multiplier": 2.0, "count": 10},
            {"type": "gaussian", "noise_multiplier": 1.5, "count": 4},
        ],
    }
    assert total_epsilon([gaussian() | {"dp_event": both}], 1e-5) == pytest.approx(
        expected, rel=1e-12
    )


def test_a_multiclass_release_calibrated_to_the_budget_fits_it(tmp_path):
    # fedeval.multiclass calibrates z so that its releases are exactly (ε, δ)-DP; the ledger must
    # not charge them more than that ε (its grid of orders includes the calibration's).
    from fedeval.multiclass.privacy import calibrate_noise

    z = calibrate_noise(1.0, 1e-5, 30)
    path = tmp_path / "l.jsonl"
    total = charge(path, gaussian(z=z, count=30, epsilon=1.0), budget=1.0)
    assert 0.999 < total <= 1.0
    with pytest.raises(BudgetExceeded):
        charge(path, gaussian(z=50.0, count=1, epsilon=0.01))


def test_gaussian_needs_a_delta(tmp_path):
    path = tmp_path / "l.jsonl"
    charge(path, entry(0.5, unit="client"), budget=10.0)  # a pure ledger: δ = 0
    with pytest.raises(UsageError, match="no finite ε at δ = 0"):
        charge(path, gaussian())
    assert len(read_ledger(path)[1]) == 1
    with pytest.raises(UsageError, match="no finite ε at δ = 0"):
        total_epsilon([gaussian()])


def test_pure_and_gaussian_compose_by_one_rdp_accountant(tmp_path):
    path = tmp_path / "l.jsonl"
    charge(path, entry(0.5, unit="client"), budget=10.0, delta=1e-5)
    charge(path, entry(0.5, unit="client", sensitivity=10**6))
    total = charge(path, gaussian(z=3.0, count=5))
    # Pure ε-DP enters as binary randomized response of the same ε (the worst pure ε-DP pair).
    rr = E.RandomizedResponseDpEvent(noise_parameter=2 / (1 + math.exp(0.5)), num_buckets=2)
    g = E.SelfComposedDpEvent(E.GaussianDpEvent(3.0), 5)
    joint = rdp_epsilon([rr, rr, g], 1e-5)
    basic = 1.0 + rdp_epsilon([g], 1e-5)
    assert math.isfinite(total) and total == pytest.approx(min(joint, basic), rel=1e-12)
    assert total > rdp_epsilon([g], 1e-5)


# --- concurrency -------------------------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_runs_lose_nothing_and_respect_the_budget(tmp_path):
    # Eight processes race to charge ε = 1 each against a budget of 5 (the first of them creates
    # the ledger): exactly five succeed, every success is in the file, one header, and the total
    # never exceeds the budget.
    path = str(tmp_path / "l.jsonl")
    ctx = mp.get_context("spawn")
    results, start = ctx.Queue(), ctx.Barrier(8)  # the eight charge at once, once all started
    procs = [
        ctx.Process(target=charge_one, args=(path, entry(1.0), results, start)) for _ in range(8)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    outcomes = sorted(results.get(timeout=10) for _ in procs)
    assert outcomes == ["ok"] * 5 + ["refused"] * 3
    header, entries = read_ledger(path)
    assert header["budget"]["epsilon"] == 5.0 and len(entries) == 5
    assert sum('"fedeval.ledger/3"' in line for line in open(path)) == 1
    assert totals(header, entries) == {"default": pytest.approx(5.0)}
