"""The two-phase audit's fast trials are the deployed path's trials: the same heights from the
same probes, the same released counts, client 0's same reports.

Most trials of `distdp_two_phase_statistic` and `localdp_two_phase_statistic` skip what their
statistic never reads (the masks and the release document; the other clients' tree reports):
these tests run the same seed through the deployed path for every trial and compare."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval import audit
from fedeval.audit.heights import heights as fast_heights
from fedeval.audit.scenarios import _cells_labels_clients
from fedeval.core.release import Probe
from fedeval.privacy import localdp, probe
from fedeval.protocol.encode import local_reports

BOUNDARY = {(s.model, s.relation): s for s in audit.two_phase_scenarios() if s.per_client > 4}


@pytest.mark.parametrize("relation", ["add-remove", "replace"])
def test_distdp_fast_trials_equal_the_documents(relation):
    # At the boundary the height moves with the probe's noise: heights 4–8 are all compared.
    scenario = BOUNDARY["distdp", relation]
    docs = audit.distdp_two_phase_statistic(scenario, 60, np.random.default_rng(3), documents=60)
    fast = audit.distdp_two_phase_statistic(scenario, 60, np.random.default_rng(3), documents=0)
    assert len(np.unique(docs[2])) >= 2
    for a, b in zip(docs, fast, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "scenario",
    [s for s in audit.all_scenarios() if s.model == "distdp" and not s.two_phase],
    ids=lambda s: s.name,
)
def test_distdp_one_phase_fast_trials_equal_the_documents(scenario):
    d = scenario.datasets()[0]
    docs = audit.distdp_release_counts(scenario, d, 30, np.random.default_rng(2), documents=30)
    fast = audit.distdp_release_counts(scenario, d, 30, np.random.default_rng(2), documents=0)
    np.testing.assert_array_equal(docs, fast)


@pytest.mark.parametrize(
    "scenario",
    [s for s in audit.two_phase_scenarios() if s.model == "localdp"],
    ids=lambda s: s.name,
)
def test_localdp_fast_heights_and_probe_part_equal_the_deployed_ones(scenario):
    d = scenario.datasets()[0]
    t = 4 if scenario.per_client > 4 else 12  # a deployed trial at n ≈ 132,000: 0.1 s
    docs, h_docs = audit.localdp_two_phase_statistic(
        scenario, d, t, np.random.default_rng(4), documents=t
    )
    fast, h_fast = audit.localdp_two_phase_statistic(
        scenario, d, t, np.random.default_rng(4), documents=0
    )
    np.testing.assert_array_equal(h_docs, h_fast)
    np.testing.assert_array_equal(docs[:, 0], fast[:, 0])


def test_batched_heights_equal_probe_height_on_many_probes():
    # Every two-phase scenario's probes, both sides: the rule over a stack of probes chooses
    # what `probe.height` chooses on each one (the boundary ones span several heights).
    for scenario in audit.two_phase_scenarios():
        base = scenario.config()
        level = probe.probe_level(base.model, audit.PROBE_RESOLUTION)
        rng = np.random.default_rng(5)
        for table in scenario.datasets():
            fine, labels, client, n = _cells_labels_clients(table, audit.PROBE_RESOLUTION)
            coarse = fine >> (audit.PROBE_RESOLUTION - level)
            trials = 40 if scenario.per_client > 4 else 8
            found, total = [], 0
            for _ in range(trials):
                if base.model.value == "distdp":
                    found.append(probe.client_sum_distdp(labels, coarse, level, n, base, rng))
                    continue
                total = len(labels) + localdp.empty_reports(len(labels), n, base)
                cells, labs, _, real = localdp.padded(coarse, labels, client, n, base)
                role = probe.roles(len(labs), base, rng)
                bits = probe.client_bits_localdp(
                    labs[role], cells[role], level, real[role], base, rng
                )
                found.append(Probe(bits.sum(axis=0), int(role.sum())))
            one = [probe.height(p, base, total, 0, audit.PROBE_RESOLUTION) for p in found]
            many = fast_heights(found, base, total, 0, audit.PROBE_RESOLUTION)
            assert many.tolist() == one, scenario.name


def test_client_zero_alone_sends_the_rows_it_sends_among_all():
    # Under unit client with one example left, client 0 is padded: alone or among all, its
    # report rows are as many, with the same empty ones (the OUE draws differ, not the rows).
    scenario = audit.Scenario("localdp", "replace", "client", 2, short_client=True)
    cfg = scenario.config()
    _, dp = scenario.datasets()
    cells, labels, client, n = _cells_labels_clients(dp, cfg.height)
    taken = np.zeros(n, np.int64)
    whole = localdp.padded(cells, labels, client, n, cfg, taken)
    zero = client == 0
    alone = localdp.padded(cells[zero], labels[zero], client[zero], 1, cfg, taken[:1])
    mine = whole[2] == 0
    for a, b in zip(alone, (x[mine] for x in whole), strict=True):
        np.testing.assert_array_equal(a, b)
    assert (~alone[3]).sum() == 1  # the padding hides the missing example
    rows = local_reports(
        cells[zero], labels[zero], client[zero], 0, 1, cfg, np.random.default_rng(0)
    )
    assert len(rows) == cfg.max_examples


def test_localdp_fast_tree_part_has_the_documents_mean():
    # Client 0's tree reports alone or among every client's: the same law, so the statistic's
    # tree part has the same mean. Two-sample z at 4.5 sds (fixed seeds: p ≈ 7e-6 by chance);
    # the fast trials encoding client 0's example under the other label move the mean from
    # 0.23 to −0.01, 7.6 sds (se ≈ 0.032 at 800 trials a side).
    scenario = audit.Scenario("localdp", "replace", height="auto")
    d = scenario.datasets()[0]
    docs, _ = audit.localdp_two_phase_statistic(
        scenario, d, 800, np.random.default_rng(6), documents=800
    )
    fast, _ = audit.localdp_two_phase_statistic(
        scenario, d, 800, np.random.default_rng(7), documents=0
    )
    a, b = docs[:, 1], fast[:, 1]
    se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) < 4.5 * se, (a.mean(), b.mean(), se)


def test_localdp_one_phase_fast_trials_have_the_documents_mean():
    # As above, one phase, unit client (client 0's L = 2 reports): the fast trials encoding
    # client 0's examples under the other label move the mean from 0.25 to −0.03, 5.6 sds.
    scenario = audit.Scenario("localdp", "replace", "client", 2)
    d = scenario.datasets()[0]
    a = audit.localdp_statistic(scenario, d, 800, np.random.default_rng(6), documents=800)
    b = audit.localdp_statistic(scenario, d, 800, np.random.default_rng(7), documents=0)
    se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) < 4.5 * se, (a.mean(), b.mean(), se)
