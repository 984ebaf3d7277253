"""The privacy audit: every mechanism, every relation and unit, as each party sees it.

Each check also runs against a deliberately broken mechanism and must fail there: an audit
never seen to fail proves nothing (shared AUDIT.md, section 4).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval import audit
from fedeval.cli import app
from fedeval.privacy import distdp
from fedeval.privacy.mechanism import Mechanism
from fedeval.privacy.noise import polya_share

SCENARIOS = audit.all_scenarios()
FULL = os.environ.get("FEDEVAL_AUDIT") == "full"  # as conftest reads it
runner = CliRunner()


def _write(table: dict[str, np.ndarray], path: Path) -> Path:
    pq.write_table(pa.table({k: pa.array(v) for k, v in table.items()}), path)
    return path


def _invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def _run_all(scenario: audit.Scenario, table: dict, tmp: Path, i: int):
    """One unseeded run of everything: the server's view (report directory, stderr of
    aggregate) and the analyst's (saved release, estimates from it, a one-shot --no-exact
    report and its release)."""
    src = _write(table, tmp / "data.parquet")
    common = [
        "-m", scenario.model, "-e", scenario.epsilon, "--height", scenario.height,
        "--shape", "hierarchy", "--relation", scenario.relation, "--unit", scenario.unit,
    ]  # fmt: skip
    if scenario.max_examples:
        common += ["--max-examples", scenario.max_examples]
    reports = tmp / f"reports{i}"
    r = _invoke("encode", src, "-o", reports, "--min-cohort", 2, *common)
    assert r.exit_code == 0, r.output
    release = tmp / f"run{i}.fedeval"
    agg = _invoke("aggregate", reports, "-o", release, "--min-cohort", 2)
    assert agg.exit_code == 0, agg.output
    server = audit.directory_fields(reports)
    server["aggregate.stderr"] = agg.stderr.replace(str(release), "OUT").replace(str(reports), "IN")
    analyst = audit.flatten(json.loads(release.read_text()), "release")
    est = _invoke("evaluate", "--from", release, "--format", "json", "--ci-draws", 50)
    analyst["evaluate.exit"] = est.exit_code
    if est.exit_code == 0:
        analyst |= audit.flatten(json.loads(est.stdout), "evaluate")
    for cmd in ("curves", "calibrate"):  # every other estimate made from the release
        out = _invoke(cmd, "--from", release, "--format", "json", "--ci-draws", 20)
        analyst[f"{cmd}.exit"] = out.exit_code
        if out.exit_code == 0:
            analyst |= audit.flatten(json.loads(out.stdout), cmd)
    one_shot = tmp / f"one{i}.fedeval"
    ledger = tmp / f"ledger{i}.jsonl"
    ev = _invoke(
        "evaluate", src, "--no-exact", "--format", "json", "--ci-draws", 50,
        "--save-release", one_shot, "--ledger", ledger, "--budget", 10, *common,
    )  # fmt: skip
    analyst["oneshot.exit"] = ev.exit_code
    if ev.exit_code == 0:
        analyst |= audit.flatten(json.loads(ev.stdout), "oneshot")
        analyst |= audit.flatten(json.loads(one_shot.read_text()), "oneshot-release")
        for j, line in enumerate(ledger.read_text().splitlines()):
            entry = {k: v for k, v in json.loads(line).items() if k not in ("time", "created")}
            analyst |= audit.flatten(entry, f"ledger[{j}]")
    cal_map = tmp / f"map{i}.json"
    cal = _invoke("calibrate", src, "--no-exact", "--ci-draws", 20, "-o", cal_map, *common)
    analyst["map.exit"] = cal.exit_code
    if cal.exit_code == 0:
        analyst |= audit.flatten(json.loads(cal_map.read_text()), "map")
    return server, analyst


def _participation(path: str) -> bool:
    """What the server sees of who takes part: declared public (the guarantee says so)."""
    return (
        path.startswith(("roster.parquet", "part-", "#files"))
        or path.startswith("manifest.json.cohort")
        or path.startswith("manifest.json.parts")
        or path.startswith("manifest.json.population")
        or path.startswith("manifest.json.secure_aggregation.neighbours_per_side")
        or path == "aggregate.stderr"
        or path == "manifest.json.integrity.sha256"
    )


def _scan(scenario, tmp_path, runs):
    """Leaks over `runs` runs per side, confirmed over as many again when any is found.

    A field that only post-processes the noisy release can still be nearly constant on D and
    move on D′ (ε-DP bounds how often, not whether): with r runs per side such a field looks
    separating with probability up to (1 − e^−ε)^r (6% at ε = 1, r = 6). A deterministic field
    stays separating in any number of runs, so a flagged path must survive 2r runs per side
    (at most 0.4% for the worst such field at ε = 1)."""
    d, dp = scenario.datasets()
    views: dict[str, list] = {"D": [], "D′": []}
    ignore_server = _participation if scenario.changes_participation else (lambda p: False)

    def run(first: int, count: int) -> tuple[list[str], list[str]]:
        for side, table in (("D", d), ("D′", dp)):
            for i in range(first, first + count):
                where = tmp_path / f"{side}{i}"
                where.mkdir()
                views[side].append(_run_all(scenario, table, where, i))
        server = audit.deterministic_leaks(
            [s for s, _ in views["D"]], [s for s, _ in views["D′"]], ignore_server
        )
        analyst = audit.deterministic_leaks([a for _, a in views["D"]], [a for _, a in views["D′"]])
        return server, analyst

    server, analyst = run(0, runs)
    if server or analyst:
        server, analyst = run(runs, runs)
    return server, analyst, views


ONE_PHASE = [s for s in SCENARIOS if not s.two_phase]
SCAN = [
    *ONE_PHASE,
    audit.Scenario("localdp", "replace", "client", 2, short_client=True),
    # `--height auto` (two-phase): the probe's totals and the height are in every document.
    audit.Scenario("distdp", "add-remove", height="auto"),
    audit.Scenario("distdp", "replace", "client", 2, height="auto"),
    audit.Scenario("localdp", "replace", "client", 2, height="auto"),
    audit.Scenario(
        "distdp",
        "add-remove",
        height="auto",
        per_client=audit.BOUNDARY_PER_CLIENT["distdp", "add-remove"],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCAN, ids=lambda s: s.name)
def test_no_document_separates_neighbours(scenario, tmp_path, scan_runs):
    server, analyst, views = _scan(scenario, tmp_path, scan_runs)
    assert analyst == [], f"the analyst's documents separate D from D′: {analyst}"
    assert server == [], f"the server's documents separate D from D′: {server}"
    # Unseeded private runs carry no seed anywhere, and say they are not a simulation.
    for _, a in views["D"]:
        assert not [p for p in a if p.endswith(".seed")], "a private document names a seed"
        assert a.get("release.privacy.reproducible_simulation") is False
        # A two-phase release states its probe's released counts (and so was scanned with them).
        probed = "release.privacy.probe.released.counts[1]" in a
        assert probed == scenario.two_phase


def test_scan_catches_an_exact_count_beside_the_noise(tmp_path, monkeypatch, scan_runs):
    """Broken on purpose: an add-remove release that publishes the exact number of clients
    (as releases did before the relation was enforced)."""
    monkeypatch.setattr(Mechanism, "exact_counts_public", property(lambda self: True))
    scenario = audit.Scenario("distdp", "add-remove", "client", 2)
    _, analyst, _ = _scan(scenario, tmp_path, 2)
    assert any("n_clients" in leak for leak in analyst), analyst


# `make test` audits one boundary population (distdp add-remove: h moves between 4 and 5);
# `make audit` (FEDEVAL_AUDIT=full) all of them (the localdp one alone takes about a minute).
EPSILON_SCENARIOS = [
    s
    for s in SCENARIOS
    if FULL
    or not s.two_phase
    or s.per_client <= 4
    or (s.model, s.relation) == ("distdp", "add-remove")
]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", EPSILON_SCENARIOS, ids=lambda s: s.name)
def test_epsilon_lower_bound_within_claim(scenario, trials):
    bound = audit.audit_epsilon(scenario, trials, np.random.default_rng(20261123))
    assert bound.epsilon_lb <= scenario.epsilon, (
        f"{scenario.name}: measured ε ≥ {bound.epsilon_lb:.3f} on '{bound.event}' "
        f"against a claim of {scenario.epsilon}"
    )


@pytest.mark.slow
def test_epsilon_audit_catches_halved_sensitivity(monkeypatch, trials):
    """Broken on purpose: noise for Δ/2 (real ε = 2 × the claim) must be caught."""
    scenario = audit.Scenario("distdp", "add-remove")

    def too_little(config):
        return math.exp(-config.epsilon / (Mechanism(config).sensitivity / 2))

    monkeypatch.setattr(distdp, "alpha", too_little)
    bound = audit.audit_epsilon(scenario, trials, np.random.default_rng(1))
    assert bound.epsilon_lb > scenario.epsilon, bound


@pytest.mark.slow
def test_epsilon_audit_catches_replace_with_add_remove_noise(monkeypatch, trials):
    """Broken on purpose: a replace release noised for the add-remove sensitivity (Δ = levels
    instead of 2·levels: the defect this relation fixes)."""
    scenario = audit.Scenario("distdp", "replace")
    monkeypatch.setattr(
        distdp, "alpha", lambda c: math.exp(-c.epsilon / (Mechanism(c).sensitivity / 2))
    )
    bound = audit.audit_epsilon(scenario, trials, np.random.default_rng(2))
    assert bound.epsilon_lb > scenario.epsilon, bound


@pytest.mark.slow
def test_epsilon_audit_catches_per_example_budget_under_unit_client(monkeypatch, trials):
    """Broken on purpose: OUE reports at the full ε while a client sends L of them."""
    from fedeval.privacy import localdp

    scenario = audit.Scenario("localdp", "replace", "client", 2)
    monkeypatch.setattr(localdp, "report_epsilon", lambda c: c.epsilon)
    bound = audit.audit_epsilon(scenario, trials, np.random.default_rng(3))
    assert bound.epsilon_lb > scenario.epsilon, bound


@pytest.mark.parametrize(
    "scenario", [s for s in ONE_PHASE if s.model == "distdp"], ids=lambda s: s.name
)
def test_every_cohort_carries_the_full_noise_independent_across_counts(scenario, trials):
    """Each cohort's noise has the stated variance, and the noise on different counts is
    independent: two checks of the same runs (each holds at its own confidence on any one
    sample), as tests/audit/test_level_split_audit.py makes them per level."""
    stated = Mechanism(scenario.config()).noise_variance
    for i, noise in enumerate(audit.cohort_noise(scenario, trials // 4, np.random.default_rng(4))):
        lo, hi = audit.variance_interval(noise)
        assert lo <= stated <= hi, (
            f"cohort {i}: variance in [{lo:.3f}, {hi:.3f}], stated {stated:.3f}"
        )
        worst, bound = audit.correlation_bound(noise)
        assert worst < bound, f"noise correlated across counts: |r| = {worst:.3f} ≥ {bound:.3f}"


@pytest.mark.slow
def test_two_phase_scenarios_at_the_boundary_do_change_the_height():
    # In the audit's boundary populations neighbours' releases come at different heights with
    # the probe's noise (else it would not test that the height is post-processing).
    for model, relation in audit.BOUNDARY_PER_CLIENT:
        sc = audit.Scenario(
            model, relation, height="auto", per_client=audit.BOUNDARY_PER_CLIENT[model, relation]
        )
        rng = np.random.default_rng(11)
        if model == "distdp":
            heights = audit.distdp_two_phase_statistic(sc, 100, rng, documents=0)[2]
        else:
            heights = audit.localdp_two_phase_statistic(
                sc, sc.datasets()[0], 100, rng, documents=0
            )[1]
        assert len(set(heights.tolist())) >= 2, (sc.name, np.unique(heights))


@pytest.mark.slow
def test_epsilon_audit_catches_a_probe_without_noise(monkeypatch, trials):
    """Broken on purpose: the distdp probe releases the exact class totals (α → 0) while the
    claim charges it s·ε; the audit must see through the tree to the probe."""
    from fedeval.privacy import probe

    monkeypatch.setattr(probe, "_alpha", lambda config: 1e-12)
    scenario = audit.Scenario("distdp", "add-remove", height="auto")
    bound = audit.audit_epsilon(scenario, trials, np.random.default_rng(8))
    assert bound.epsilon_lb > scenario.epsilon, bound
    assert bound.event.startswith("probe part"), bound


@pytest.mark.slow
def test_epsilon_audit_catches_bare_probe_reports(monkeypatch, trials):
    """Broken on purpose: localdp probe reports sent without randomising their label."""
    from fedeval.privacy import probe

    def bare(labels, cells, level, real, config, rng):
        bits = np.zeros((len(labels), 2 << level), bool)
        bits[np.arange(len(labels)), probe.probe_index(labels, cells, level)] = real
        return bits

    monkeypatch.setattr(probe, "client_bits_localdp", bare)
    scenario = audit.Scenario("localdp", "replace", height="auto")
    bound = audit.audit_epsilon(scenario, trials, np.random.default_rng(9))
    assert bound.epsilon_lb > scenario.epsilon, bound


def test_correlation_audit_catches_noise_reused_across_counts(monkeypatch, trials):
    """Broken on purpose: one share drawn per client and added to every count (the seeded
    re-made-generator bug of research code): each count's variance is right, the claim is not."""
    from fedeval.privacy import federated

    def one_share_for_all(rows, config, cohort_size, rng):
        reports = federated.onehot_reports(rows, config)
        share = polya_share(cohort_size, distdp.alpha(config), (rows.n_clients, 1), rng)
        return reports + share, None

    monkeypatch.setattr(distdp, "client_reports", one_share_for_all)
    scenario = audit.Scenario("distdp", "add-remove")
    noise = audit.cohort_noise(scenario, trials // 4, np.random.default_rng(7))[0]
    worst, bound = audit.correlation_bound(noise)
    assert worst >= bound
    # Each count on its own has the stated variance: a per-count check alone is fooled.
    lo, hi = audit.variance_interval(noise[:, 0])
    assert lo <= Mechanism(scenario.config()).noise_variance <= hi


def test_cohort_audit_catches_shares_sized_for_the_population(monkeypatch, trials):
    """Broken on purpose: shares sized for every client of the run (N) rather than the cohort
    (m), as before: each cohort's sum then carries only Pólya(m/N) noise."""
    scenario = audit.Scenario("distdp", "add-remove")
    population = scenario.clients

    def shares_for_population(rows, config, cohort_size, rng):
        from fedeval.core.release import level_offsets
        from fedeval.privacy import federated

        reports = federated.onehot_reports(rows, config)
        d = int(level_offsets(config)[-1])
        shape = (rows.n_clients, d)
        return reports + polya_share(population, distdp.alpha(config), shape, rng), None

    monkeypatch.setattr(distdp, "client_reports", shares_for_population)
    stated = Mechanism(scenario.config()).noise_variance
    caught = False
    for noise in audit.cohort_noise(scenario, trials // 4, np.random.default_rng(5)):
        lo, hi = audit.variance_interval(noise)
        caught |= not (lo <= stated <= hi)
    assert caught


def test_a_seeded_run_says_it_is_not_private_and_its_seed_breaks_it(tmp_path):
    """Broken on purpose: a published seed lets anyone regenerate the noise, so a seeded
    release must say so; the attack below tells D from D′ with certainty."""
    scenario = audit.Scenario("distdp", "add-remove")
    d, dp = scenario.datasets()
    src = _write(d, tmp_path / "d.parquet")
    other = _write(dp, tmp_path / "dp.parquet")
    args = ["-m", "distdp", "--height", "2", "--shape", "hierarchy", "--no-exact"]
    r = _invoke("evaluate", src, *args, "--seed", 99, "--format", "json",
                "--save-release", tmp_path / "r.fedeval")  # fmt: skip
    doc = json.loads(r.stdout)
    assert doc["run"]["reproducible_simulation"] is True
    assert "NOT private" in doc["privacy"]["guarantee"]
    release = json.loads((tmp_path / "r.fedeval").read_text())
    assert release["privacy"]["reproducible_simulation"] is True
    # The attack: rerun with the published seed on each candidate; the matching one is D.
    seed = doc["run"]["seed"]
    for cand, expect in ((src, True), (other, False)):
        out = tmp_path / f"cand{expect}.fedeval"
        _invoke("evaluate", cand, *args, "--seed", seed, "--save-release", out)
        same = json.loads(out.read_text())["counts"] == release["counts"]
        assert same is expect


def test_one_client_cohort_is_refused(tmp_path):
    """A cohort of one would upload its report bare; below --min-cohort nothing is written."""
    d, _ = audit.Scenario("distdp", "add-remove").datasets()
    one = {k: v[d["client"] == 0] for k, v in d.items()}
    src = _write(one, tmp_path / "one.parquet")
    r = _invoke("encode", src, "-o", tmp_path / "rep", "-m", "federated", "--min-cohort", 2)
    assert r.exit_code == 2
    assert "cohort" in r.stderr and not (tmp_path / "rep").exists()
    r = _invoke("encode", src, "-o", tmp_path / "rep", "-m", "federated", "--min-cohort", 1)
    assert r.exit_code == 2
