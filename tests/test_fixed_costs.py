"""The fixed costs of one evaluation cut without changing a value (issue 28): the AP's reach
read only on the leaves with departing examples,
and the departing examples read once per evaluation give what computing each afresh gives,
bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import fedeval
from fedeval.api.calibrate import release_ece
from fedeval.api.curves import curve_result, release_departures
from fedeval.api.evaluate import release_parts
from fedeval.estimate.smoothness import _leaf_terms, _reach, rough_ap_reach


def _reach_everywhere(leaves: np.ndarray, departing: np.ndarray) -> tuple[np.ndarray, ...]:
    """`rough_ap_reach` as it read every leaf (the formula over all of them)."""
    p, n, a, c = _leaf_terms(np.asarray(leaves, dtype=np.float64))
    dep = np.asarray(departing, dtype=np.float64)[..., ::-1]
    e_p, e_n = np.minimum(dep[..., 1, :], p), np.minimum(dep[..., 0, :], n)
    down, up = _reach(p, n, a, c, e_p, e_n)
    live = p > 0
    total = p.sum(axis=-1)
    defined = total > 0
    safe = np.where(defined, total, 1.0)
    below = np.clip(np.where(live, down, 0.0).sum(axis=-1), 0.0, None) / safe
    above = np.clip(np.where(live, up, 0.0).sum(axis=-1), 0.0, None) / safe
    return np.where(defined, below, 1.0), np.where(defined, above, 1.0)


@pytest.mark.parametrize("seed", range(6))
def test_reach_on_departing_leaves_only_is_the_reach_everywhere(seed: int) -> None:
    rng = np.random.default_rng([28, 6, seed])
    n_leaves = int(rng.choice([4, 16, 64, 512]))
    lam = rng.choice([0.3, 5.0, 300.0])
    leaves = rng.poisson(lam, (2, n_leaves)).astype(float)
    stack = leaves + rng.normal(0, 2.0, (30, 2, n_leaves))  # noisy rows: fractional, < 0
    departing = np.zeros((2, n_leaves))
    hit = rng.random((2, n_leaves)) < 0.1
    departing[hit] = rng.choice([0.5, 3.0, np.inf], hit.sum())
    departing[:, 0] = departing[:, -1] = np.inf
    for x in (leaves, stack, np.zeros_like(leaves)):
        for d in (departing, np.zeros_like(departing), np.full_like(departing, np.inf)):
            got, want = rough_ap_reach(x, d), _reach_everywhere(x, d)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("model", ["federated", "distdp"])
def test_departures_read_once_give_each_interval_as_before(model: str) -> None:
    rng = np.random.default_rng([28, 8])
    y = rng.random(40_000) < 0.2
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.15), 0, 1)
    s[:2000] = 0.5  # a point mass: parents depart
    ev = fedeval.evaluate(y, s, model=model, seed=3)
    run = ev.run
    departing = release_departures(run)
    assert not departing.flags.writeable
    assert np.isinf(departing).any() or np.count_nonzero(departing) > 0
    thresholds = run.to_unit(np.array([0.3, 0.5]))
    assert release_parts(run, thresholds, None, None, departing).auc == (
        release_parts(run, thresholds, None, None).auc
    )
    shared, alone = curve_result(run, departing=departing), curve_result(run)
    assert shared.average_precision == alone.average_precision
    assert shared.ap_parts == alone.ap_parts
    assert release_ece(run, 15, None, departing) == release_ece(run, 15, None)
    assert ev.ece == release_ece(run, 15, ev.ece.exact if ev.ece else None)
