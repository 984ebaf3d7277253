"""The audit of localdp with its reports split over the levels (`fedeval.privacy.report_split`),
through the deployed encoder (`fedeval.protocol.encode.local_reports`, the rows the server
receives): the ε lower bound of client 0's reports stays within the claim, and the level each of
its reports states, which the server sees and the release counts per level, has the same law on
neighbouring datasets, so an adversary learns nothing from it. The level check is also run
against a split that reads the data to pick a report's level, and must fail."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval import audit
from fedeval.core.hierarchy import cell_index
from fedeval.privacy import localdp, report_split
from fedeval.privacy.noise import oue_sparse
from fedeval.protocol.encode import local_reports

SPLITS = [
    audit.Scenario("localdp", "replace", height=3, split=(1, 0.8)),
    audit.Scenario("localdp", "replace", "client", 2, height=3, split=(2, 0.5)),
]


def level_statistic(scenario: audit.Scenario, on_dp: bool, trials: int, seed: int):
    """Σ of the level indices client 0's report rows state, in each of `trials` encodings of
    client 0: one call of the encoder on `trials` copies of client 0 (each copy a client of its
    own; every report is drawn on its own, so each copy's rows are one encoding of client 0)."""
    cfg = scenario.config()
    assert cfg.level_split
    table = scenario.datasets()[int(on_dp)]
    zero = table["client"] == 0
    m = int(zero.sum())
    cells = np.tile(cell_index(table["score"][zero], cfg.height), trials)
    labels = np.tile(table["label"][zero].astype(bool), trials)
    client = np.repeat(np.arange(trials), m)
    rows = local_reports(cells, labels, client, 0, trials, cfg, np.random.default_rng(seed))
    who = np.asarray(rows["client"]).astype(np.int64)
    return np.bincount(who, weights=np.asarray(rows["level"], float), minlength=trials)


def _level_bound(scenario: audit.Scenario, trials: int) -> audit.EpsilonBound:
    """The larger ε lower bound of the two orientations of the statistic (a level read from
    the data may move it either way; `epsilon_lower_bound` takes large values as evidence for
    D), each at 1 − 0.001/2."""
    d = level_statistic(scenario, False, trials, 1)
    dp = level_statistic(scenario, True, trials, 2)
    return max(
        (audit.epsilon_lower_bound(sign * d, sign * dp, confidence=0.9995) for sign in (1, -1)),
        key=lambda b: b.epsilon_lb,
    )


@pytest.mark.parametrize("scenario", SPLITS, ids=lambda s: s.name)
def test_levels_of_the_reports_have_the_same_law_on_neighbours(scenario, trials):
    # Their law is the same on D and D′ (drawn without reading the data), so any positive
    # lower bound would be a false alarm of the bound's 99.9% confidence.
    bound = _level_bound(scenario, trials)
    assert bound.epsilon_lb == 0.0, bound


def _leaky(cells, labels, config, rng, real=None):
    """Broken on purpose: a positive's report goes to the finest level (the level read from
    the data), the others' as the split draws them; the reports are the honest OUE."""
    levels, h = config.levels, config.height
    drawn = report_split.draw_levels(len(cells), config, rng)
    group = np.where(np.asarray(labels).astype(bool), len(levels) - 1, drawn)
    out = []
    for i, k in enumerate(levels):
        at = group == i
        cols = (np.asarray(labels)[at].astype(np.int64) << k) + (
            np.asarray(cells, np.int64)[at] >> (h - k)
        )
        on = None if real is None else real[at]
        out.append(oue_sparse(cols, 2 << k, localdp.report_epsilon(config), rng, on))
    return group, out


def test_level_audit_catches_a_level_read_from_the_data(monkeypatch, trials):
    monkeypatch.setattr(localdp, "sparse_reports", _leaky)
    bound = _level_bound(SPLITS[0], trials)
    assert bound.epsilon_lb > SPLITS[0].epsilon, bound


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SPLITS, ids=lambda s: s.name)
def test_epsilon_lower_bound_of_a_split_within_claim(scenario, trials):
    # The OUE bits of client 0's reports at the levels they state (`audit.localdp_statistic`).
    bound = audit.audit_epsilon(scenario, trials, np.random.default_rng(20261127))
    assert bound.epsilon_lb <= scenario.epsilon, bound
