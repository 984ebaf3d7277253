"""Two-phase `--height auto` under DP: the probe of the class totals, the height rule, the
composed claim, the ledger's ε and what the documents state."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.core.errors import ReleaseError
from fedeval.core.params import (
    AUTO_MAX_HEIGHT,
    PROBE_SHARE,
    oue_sigma2,
    probe_height,
    resolve_config,
)
from fedeval.core.release import Probe, Release
from fedeval.privacy import localdp, probe
from fedeval.privacy.accounting import total_epsilon
from fedeval.privacy.decode import decode
from fedeval.privacy.ledger import make_entry
from fedeval.privacy.mechanism import Mechanism, mechanism_from_section, mechanism_of
from fedeval.privacy.noise import discrete_laplace_variance
from fedeval.protocol.simulate import fast_release, simulate
from fedeval.tables.scored import scored_from_arrays


def _data(n: int, positives: int, seed: int = 0, clients: int | None = None):
    rng = np.random.default_rng(seed)
    y = np.zeros(n, int)
    y[rng.choice(n, positives, replace=False)] = 1
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.15), 0, 1)
    ids = None if clients is None else rng.integers(0, clients, n)
    return scored_from_arrays(y, s, client_ids=ids, keep_examples=clients is not None)


def _auto(model: str, **kw) -> PrivacyConfig:
    return resolve_config(model, n=0, **kw)


def test_auto_under_dp_is_two_phase_and_a_given_height_is_not():
    for model in ("distdp", "localdp"):
        cfg = _auto(model)
        assert cfg.probed and cfg.probe_share == PROBE_SHARE
        assert not resolve_config(model, n=0, height=6).probed
    assert not resolve_config("federated", n=10**6).probed
    # Without a probe round, auto keeps the one-phase rule from n.
    assert not resolve_config("distdp", n=10**6, probe=False).probed


def test_distdp_probe_totals_are_unbiased_with_the_stated_noise():
    # R draws of the probe's noisy totals: mean within 5 SE of the exact totals, and the
    # variance within 5 SE of the discrete Laplace's 2α/(1 − α)² at α = exp(−s·ε/Δ) (SE of a
    # sample variance ≈ σ²·√((κ − 1)/R), κ ≈ 6 for the Laplace).
    cfg = _auto("distdp", epsilon=1.0)
    a = Mechanism(cfg).probe_alpha
    assert a == pytest.approx(math.exp(-PROBE_SHARE * 1.0 / 1))
    exact = np.array([7000, 300])
    r = 20_000
    rng = np.random.default_rng(1)
    draws = np.array([probe.draw_distdp(exact, cfg, rng).counts for _ in range(r)], float)
    var = discrete_laplace_variance(a)
    assert np.all(np.abs(draws.mean(axis=0) - exact) < 5 * math.sqrt(var / r))
    assert np.all(np.abs(draws.var(axis=0) - var) < 5 * var * math.sqrt(5 / r))


def test_distdp_per_client_probe_sums_to_the_same_noise():
    # Every client's Pólya share sized to all clients: the sum is the same discrete Laplace.
    cfg = _auto("distdp", epsilon=1.0)
    labels = np.r_[np.zeros(500, bool), np.ones(100, bool)]
    cells = labels.astype(int)  # negatives in cell 0, positives in cell 1 of a 2-cell probe
    rng = np.random.default_rng(2)
    r = 4000
    noise = np.array(
        [
            probe.client_sum_distdp(labels, cells, 1, 200, cfg, rng).counts - [500, 0, 0, 100]
            for _ in range(r)
        ],
        float,
    )
    var = discrete_laplace_variance(Mechanism(cfg).probe_alpha)
    assert np.all(np.abs(noise.mean(axis=0)) < 5 * math.sqrt(var / r))
    assert np.all(np.abs(noise.var(axis=0) - var) < 5 * var * math.sqrt(5 / r))


def test_localdp_probe_totals_are_unbiased():
    # The OUE estimate of each total from the probe's reports, rescaled to every report: its
    # mean over R draws within 5 standard errors of the truth (SE from the draws' own spread:
    # the estimate is a smooth function of sums of many independent bits, close to normal).
    cfg = _auto("localdp", epsilon=2.0)
    leaves = np.array([[4000, 3000], [200, 800]])  # (2 classes, 2 cells)
    n = int(leaves.sum())
    r_draws = 3000
    rng = np.random.default_rng(3)
    est = []
    for _ in range(r_draws):
        found, rest, rest_pad = probe.draw_localdp(leaves, 0, 1, cfg, rng)
        assert found.reports == n - int(rest.sum()) and rest_pad == 0
        est.append(probe.totals(found, cfg, n))
    est = np.array(est)
    se = est.std(axis=0, ddof=1) / math.sqrt(r_draws)
    assert np.all(np.abs(est.mean(axis=0) - leaves.sum(axis=1)) < 5 * se)
    # About s of the reports are probe reports: Binomial(n, s), within 5 sd.
    reports = probe.draw_localdp(leaves, 0, 1, cfg, rng)[0].reports
    assert abs(reports - n * PROBE_SHARE) < 5 * math.sqrt(n * PROBE_SHARE * (1 - PROBE_SHARE))


def test_the_height_rule():
    # 2^h = 0.45·√(ε·m) under distdp, (m²/(n·σ²))^(1/4) under OUE, then clamped.
    assert probe_height("distdp", negatives=1e6, positives=59_957, epsilon=0.95) == round(
        math.log2(0.45 * math.sqrt(0.95 * 59_957))
    )
    m, n = 15_000, 10**6
    expected = round(math.log2((m * m / (n * oue_sigma2(5.0))) ** 0.25))
    assert probe_height("localdp", negatives=n - m, positives=m, epsilon=5.0, reports=n) == max(
        expected, 2
    )
    # The minority class decides; the floor, the alignment floor and the ceiling clamp.
    assert probe_height("distdp", negatives=10, positives=1e9, epsilon=1.0) == 4
    assert probe_height("distdp", negatives=1e12, positives=1e12, epsilon=1.0) == 14
    assert probe_height("distdp", negatives=100, positives=100, epsilon=1.0, min_height=9) == 9
    assert probe_height("localdp", negatives=-50, positives=10, epsilon=1.0, reports=60) == 2
    heights = [probe_height("distdp", negatives=1e9, positives=m, epsilon=1.0) for m in
               (1e2, 1e3, 1e4, 1e5, 1e6, 1e7)]  # fmt: skip
    assert heights == sorted(heights) and heights[-1] <= AUTO_MAX_HEIGHT[PrivacyModel.DISTDP]


def test_distdp_probe_reads_no_exact_count():
    # Same positives, ten times the negatives: with one seed the probe's noise on the
    # positives' cells is the same draw, so their released cells differ only by the data.
    small, large = _data(20_000, 3000), _data(200_000, 3000)
    for seed in range(3):
        a = simulate(small, model="distdp", seed=seed, ci_draws=0)
        b = simulate(large, model="distdp", seed=seed, ci_draws=0)
        for run, n in ((a, 20_000), (b, 200_000)):
            hist = run.release.probe.histogram
            assert hist.shape == (2, 64)
            # Each count carries discrete Laplace noise: the totals within 6 sd of the truth.
            sd = math.sqrt(64 * discrete_laplace_variance(run.mechanism.probe_alpha))
            assert np.all(np.abs(hist.sum(axis=1) - [n - 3000, 3000]) < 6 * sd)


def test_localdp_two_phase_decodes_to_every_report():
    # The tree's counts are rescaled by all reports (probe + tree), so the decoded total
    # estimates n, not the (1 − s)·n tree reports: mean over R draws within 5 SE.
    data = _data(30_000, 9000)
    cfg = _auto("localdp", epsilon=3.0)
    rng = np.random.default_rng(4)
    totals = []
    for _ in range(60):
        rel = fast_release(data, cfg, rng)
        assert rel.total_reports == 30_000 and rel.probe_reports > 0
        h = decode(rel)
        totals.append(h.positives + h.negatives)
    totals = np.array(totals)
    assert abs(totals.mean() - 30_000) < 5 * totals.std(ddof=1) / math.sqrt(len(totals))


@pytest.mark.parametrize(
    "relation,unit,cap,sens", [("add-remove", "example", None, 1), ("replace", "example", None, 2),
                               ("add-remove", "client", 3, 3), ("replace", "client", 3, 6)]
)  # fmt: skip
def test_distdp_claim_composes_probe_and_tree_to_epsilon(relation, unit, cap, sens):
    cfg = _auto("distdp", epsilon=2.0, relation=relation, unit=unit, max_examples=cap)
    mech = Mechanism(cfg)
    assert mech.probe_sensitivity == sens
    assert mech.probe_epsilon == pytest.approx(2.0 * PROBE_SHARE)
    assert mech.tree_epsilon == pytest.approx(2.0 * (1 - PROBE_SHARE))
    assert mech.alpha == pytest.approx(math.exp(-mech.tree_epsilon / mech.sensitivity))
    event = mech.dp_event()
    assert event["type"] == "composed"
    probe_event, tree_event = event["events"]
    assert probe_event == {
        "type": "discrete_laplace",
        "parameter": pytest.approx(2.0 * PROBE_SHARE / sens),
        "sensitivity": sens,
    }
    # The tree's event is that of a given height at (1 − s)·ε.
    tree_only = PrivacyConfig(cfg.model, cfg.height, cfg.shape, 2.0 * (1 - PROBE_SHARE), cfg.unit,
                              cfg.max_examples, cfg.relation)  # fmt: skip
    assert tree_event == Mechanism(tree_only).dp_event()
    # The ledger charges exactly ε, as for a given height.
    doc = {"privacy": mech.section(), "fedeval_version": "x"}
    entry = make_entry(doc, command="evaluate", covered="test")
    assert total_epsilon([entry]) == pytest.approx(2.0, rel=1e-12)
    fixed = Mechanism(PrivacyConfig(cfg.model, 5, cfg.shape, 2.0, cfg.unit, cfg.max_examples,
                                    cfg.relation))  # fmt: skip
    fixed_entry = make_entry({"privacy": fixed.section()}, command="evaluate", covered="test")
    assert total_epsilon([fixed_entry]) == pytest.approx(total_epsilon([entry]), rel=1e-12)
    assert "0.1 + 1.9 = 2" in mech.guarantee()


def test_localdp_claim_is_unchanged_by_the_probe():
    cfg = _auto("localdp", epsilon=4.0, unit="client", max_examples=4)
    mech = Mechanism(cfg)
    assert mech.dp_event() == {"type": "pure", "epsilon": 4.0}
    assert mech.report_epsilon == mech.probe_epsilon == 1.0
    assert mech.probe_parameters()["composition"].startswith("parallel")
    assert "report their label and cell among 16" in mech.guarantee()


def test_given_height_documents_are_what_they_were():
    # No probe: no probe keys anywhere, the one discrete Laplace event.
    cfg = PrivacyConfig(PrivacyModel.DISTDP, 6, Shape.HIERARCHY, 1.0)
    section = Mechanism(cfg).section()
    assert not {"probe", "probe_share"} & set(section)
    assert section["dp_event"]["type"] == "discrete_laplace"


def test_probed_section_states_the_released_counts_and_round_trips():
    data = _data(5000, 800)
    run = simulate(data, model="distdp", seed=1, ci_draws=0)
    section = run.mechanism.section()
    assert section["probe_share"] == PROBE_SHARE
    released = section["probe"]["released"]
    assert released == {"counts": run.release.probe.counts.tolist()}
    assert section["height"] == run.config.height
    back = mechanism_from_section(section)
    assert back.config == run.config and back.probe.same(run.release.probe)
    missing = {**section, "probe": {k: v for k, v in section["probe"].items() if k != "released"}}
    with pytest.raises(ValueError, match="probe"):
        mechanism_from_section(missing)


def test_a_release_carries_its_probe_exactly_when_probed():
    cfg = resolve_config("distdp", n=0, min_height=2)
    from dataclasses import replace

    cfg = replace(cfg, height=2)
    counts = np.zeros(12, np.int64)
    with pytest.raises(ReleaseError, match="probe"):
        Release(cfg, counts, None, None)
    a = Release(cfg, counts, None, None, probe=Probe([10, 3]))
    b = Release(cfg, counts, None, None, probe=Probe([10, 4]))
    assert (a + Release(cfg, counts, None, None, probe=Probe([10, 3]))).probe.same(a.probe)
    with pytest.raises(ReleaseError, match="other probes"):
        _ = a + b
    fixed = replace(cfg, probe_share=0.0)
    with pytest.raises(ReleaseError, match="probe"):
        Release(fixed, counts, None, None, probe=Probe([1, 1]))
    assert mechanism_of(cfg, probe=a.probe).section()["probe"]["released"] == {"counts": [10, 3]}


@pytest.mark.parametrize("path", ["fast", "per-client"])
def test_localdp_unit_client_two_phase_release_reloads(tmp_path, path):
    """Every client's L slots are the probe's reports plus the tree's: the saved release passes
    its consistency check on reload (it counted the tree's reports alone), and a probe stating
    more set bits than reports is refused."""
    import json

    from fedeval.core.errors import InputError
    from fedeval.documents.release_file import load_release, release_dict, save_release
    from fedeval.documents.seals import seal

    data = _data(3000, 900, clients=400)
    run = simulate(
        data, model="localdp", unit="client", max_examples=12, path=path, seed=3, ci_draws=0
    )
    release = run.release
    assert release.probe is not None and release.probe.reports > 0
    assert release.total_reports == 400 * 12
    out = tmp_path / "r.fedeval"
    save_release(out, release, data.axis)
    back, _ = load_release(out)
    assert back.probe.same(release.probe)
    assert back.total_reports == 400 * 12
    bad = json.loads(json.dumps(release_dict(release, data.axis)))
    bad["privacy"]["probe"]["released"]["counts"][0] = release.probe.reports + 1
    tampered = tmp_path / "bad.fedeval"
    tampered.write_text(json.dumps(seal(bad)))  # re-sealed: anyone can recompute a digest
    with pytest.raises(InputError, match="probe counts"):
        load_release(tampered)


def test_localdp_probe_reports_measure_their_level():
    # A probe report is the OUE of (label, cell) at the probe level (4) and the report ε: a
    # report of that tree level. Decoding pools them with the level's own reports, so each
    # level-4 count is measured by n_k + probe reports: its noise is `cell_variance` at that
    # pooled number (ignoring the probe's reports gives about 1.2x that variance at 40,000
    # rows, 4-5 levels). Over R releases and the 32 cells, z = (decoded − truth)/sd is
    # mean 0 and mean z² is 1 within 5 SE of the mean over R·32 (nearly independent) values;
    # the interval draws (`measurement_noise`) carry the same variance.
    # Every other level of the tree after a probe is measured as at that fixed height: from
    # its own reports, rescaled to all reports (the probe's too), at `cell_variance` of its
    # own n_k; z likewise over those levels' cells (issue 25: auto's tree must not read the
    # data otherwise than the fixed height's).
    data = _data(40_000, 12_000)
    cfg = _auto("localdp", epsilon=5.0)
    truth = data.leaf_counts(4).astype(float)
    exact = {level: data.leaf_counts(level).astype(float) for level in range(2, 9)}
    rng = np.random.default_rng(7)
    z, drawn, others = [], [], []
    for _ in range(80):
        rel = fast_release(data, cfg, rng)
        levels = list(rel.config.levels)
        assert 4 in levels and rel.probe is not None and rel.probe.cells == 16
        i = levels.index(4)
        n_k = int(rel.reporters[i]) + rel.probe_reports
        sd = np.sqrt(localdp.cell_variance(rel.total_reports, n_k, truth, 5.0))
        measured, _ = localdp.decode(rel)
        z.append((measured[i] - truth) / sd)
        draws = localdp.measurement_noise(decode(rel), 40, rng)[i]
        drawn.append(draws.var(axis=0, ddof=1) / sd**2)
        for j, level in enumerate(levels):
            if j != i:
                c = exact[level]
                n_j = int(rel.reporters[j])
                sd_j = np.sqrt(localdp.cell_variance(rel.total_reports, n_j, c, 5.0))
                others.append(((measured[j] - c) / sd_j).ravel())
    z = np.array(z)
    k = z.size
    assert abs(z.mean()) < 5 / math.sqrt(k)
    assert abs(np.mean(z**2) - 1.0) < 5 * math.sqrt(2 / k)
    assert abs(np.mean(drawn) - 1.0) < 5 * math.sqrt(2 / (39 * k))
    rest = np.concatenate(others)
    assert rest.size >= 80 * 2 * (4 + 8 + 32)  # levels 2, 3 and 5 at least
    assert abs(rest.mean()) < 5 / math.sqrt(rest.size)
    assert abs(np.mean(rest**2) - 1.0) < 5 * math.sqrt(2 / rest.size)
