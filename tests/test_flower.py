"""fedeval on Flower, without an engine: the real ClientApp answering real Flower messages in
this process (`fedeval.flower.inprocess`), so every protocol path runs in seconds. The engine
itself (Ray, SuperLink/SuperNodes) is exercised in test_flower_engine.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

pytest.importorskip(
    "flwr", reason="the flower extra is not installed (pip install 'fedeval[flower]')"
)

from fedeval import audit
from fedeval.api.evaluate import evaluate_file, evaluate_run
from fedeval.core.config import config_dict
from fedeval.core.errors import UsageError
from fedeval.documents.release_file import load_release, release_dict, save_release
from fedeval.flower import client as protocol
from fedeval.flower.inprocess import InProcessFederation
from fedeval.flower.job import ClientData
from fedeval.flower.server import ProtocolError, ServerProtocol
from fedeval.flower.settings import RunSettings
from fedeval.privacy.mechanism import mechanism_from_section
from fedeval.protocol import secagg
from fedeval.protocol.simulate import Simulated
from fedeval.views.dicts import evaluation_dict as to_dict

runner = CliRunner()
CLIENTS = 20


@pytest.fixture(scope="module")
def scan_runs() -> int:
    """Unseeded runs per side of the leak scan, as tests/audit runs it (more under make audit)."""
    return 8 if os.environ.get("FEDEVAL_AUDIT") == "full" else 6


def _table(seed: int = 0, rows: int = 3000, clients: int = CLIENTS) -> dict[str, np.ndarray]:
    """Scores with ties (rounded to 1/200) and some exactly on the default thresholds,
    unequal clients (Zipf-like sizes, every client at least one row)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    s = np.clip(0.35 * y + 0.65 * rng.random(rows), 0, 1)
    s[: rows // 2] = np.round(s[: rows // 2] * 200) / 200
    s[::97] = (1 + np.arange(len(s[::97])) % 10) / 11
    weights = 1.0 / np.arange(1, clients + 1)
    c = rng.choice(clients, size=rows, p=weights / weights.sum())
    c[:clients] = np.arange(clients)
    return {"score": s, "label": y, "client": c}


def _split(table: dict[str, np.ndarray], where: Path) -> list[int]:
    """One file per client id ({id}.parquet); the ids present."""
    where.mkdir(parents=True, exist_ok=True)
    ids = sorted(set(table["client"].tolist()))
    for i in ids:
        rows = table["client"] == i
        pq.write_table(
            pa.table({"score": table["score"][rows], "label": table["label"][rows]}),
            where / f"{i}.parquet",
        )
    return ids


def _write(table: dict[str, np.ndarray], path: Path) -> Path:
    pq.write_table(pa.table({k: pa.array(v) for k, v in table.items()}), path)
    return path


class _Recorder:
    """The server's view of one run: every reply it received, keyed by the data holder
    (the strongest server: it links a node to its holder across runs)."""

    def __init__(self, fed: InProcessFederation) -> None:
        self.fed = fed
        self.view: dict[str, object] = {}

    def send(self, payloads):
        step = next(iter(payloads.values()))["step"] if payloads else "none"
        n = 0
        for node, reply in self.fed.send(payloads):
            n += 1
            holder = self.fed.partition[node]
            for k, v in reply.items():
                value = v.tobytes().hex() if isinstance(v, np.ndarray) else v
                shape = list(v.shape) if isinstance(v, np.ndarray) else None
                self.view[f"{step}.holder{holder}.{k}"] = value
                self.view[f"{step}.holder{holder}.{k}#shape"] = shape
            yield node, reply
        key = f"{step}#replies"
        self.view[key] = self.view.get(key, 0) + n  # type: ignore[operator]


def _run(table, tmp: Path, settings: RunSettings, *, drop=None, record=False):
    ids = _split(table, tmp)
    fed = InProcessFederation(tmp, len(ids), drop=drop, partitions=ids)
    rec = _Recorder(fed) if record else None
    proto = ServerProtocol(
        settings.job(),
        rec.send if rec else fed.send,
        min_cohort=settings.min_cohort,
        neighbours=settings.neighbours,
        retries=settings.retries,
    )
    outcome = proto.run(fed.node_ids)
    return outcome, (rec.view if rec else None)


# ------------------------------------------------------------------------------------------
# Exactness: the Flower path is the one-shot path


def test_federated_release_equals_the_one_shot_bit_for_bit(tmp_path):
    table = _table()
    src = _write(table, tmp_path / "all.parquet")
    outcome, _ = _run(table, tmp_path / "clients", RunSettings(model="federated"))
    one = evaluate_file(src, model="federated", seed=3)
    assert outcome.release.config == one.run.release.config
    assert np.array_equal(outcome.release.counts, one.run.release.counts)
    ev = evaluate_run(Simulated.from_release(outcome.release, outcome.axis, seed=3))
    assert ev.auc.estimate == one.auc.estimate
    for a, b in zip(ev.thresholds, one.thresholds, strict=True):
        assert (a.threshold, a.precision.estimate, a.recall.estimate, a.accuracy.estimate) == (
            b.threshold,
            b.precision.estimate,
            b.recall.estimate,
            b.accuracy.estimate,
        )
    assert outcome.reported == CLIENTS and outcome.recovered == 0


def test_declared_thresholds_and_a_score_range_reach_every_client(tmp_path):
    table = _table(1)
    table["score"] = table["score"] * 8 - 4
    src = _write(table, tmp_path / "all.parquet")
    settings = RunSettings(model="federated", score_range=(-4, 4), thresholds=(-1.5, 0.25, 2.0))
    outcome, _ = _run(table, tmp_path / "clients", settings)
    one = evaluate_file(src, model="federated", score_range=(-4, 4), thresholds=[-1.5, 0.25, 2])
    assert outcome.axis == one.run.axis and not outcome.axis.is_linear
    assert np.array_equal(outcome.release.counts, one.run.release.counts)


def test_federated_dropout_is_recovered_to_the_survivors_release(tmp_path):
    table = _table(2)
    lost = {3: "report", 7: "report", 8: "report"}
    outcome, _ = _run(table, tmp_path / "clients", RunSettings(model="federated"), drop=lost)
    assert (outcome.reported, outcome.recovered, outcome.rounds) == (CLIENTS - 3, 3, 1)
    keep = ~np.isin(table["client"], list(lost))
    survivors = {k: v[keep] for k, v in table.items()}
    one = evaluate_file(_write(survivors, tmp_path / "s.parquet"), model="federated", seed=1)
    assert np.array_equal(outcome.release.counts, one.run.release.counts)


def test_a_survivor_without_neighbours_is_never_exposed(tmp_path):
    """K = 1: the clients at roster positions 0 and 2 drop out, so client 1 loses both its
    neighbours; revealing their keys would expose its report, so the round is re-run over the
    survivors (fresh masks) instead, and the release is still theirs exactly."""
    from fedeval.flower.client_app import make_client_app

    table = _table(3)
    ids = _split(table, tmp_path / "c")
    fed = InProcessFederation(tmp_path / "c", len(ids), partitions=ids)
    roster = sorted(fed.node_ids)
    holders = {fed.partition[roster[0]], fed.partition[roster[2]]}
    fed.app = make_client_app(data_dir=str(tmp_path / "c"), drop=dict.fromkeys(holders, "report"))
    assert len(secagg.exposed_survivors(np.array([0, 2]), CLIENTS, 1)) == 1
    proto = ServerProtocol(RunSettings(model="federated").job(), fed.send, neighbours=1)
    outcome = proto.run(fed.node_ids)
    assert (outcome.rounds, outcome.reported, outcome.recovered) == (2, CLIENTS - 2, 0)
    assert "reveal" not in outcome.traffic.messages
    keep = ~np.isin(table["client"], list(holders))
    survivors = {k: v[keep] for k, v in table.items()}
    one = evaluate_file(_write(survivors, tmp_path / "s.parquet"), model="federated")
    assert np.array_equal(outcome.release.counts, one.run.release.counts)


def test_distdp_dropout_reruns_with_shares_sized_to_the_survivors(tmp_path, monkeypatch):
    from fedeval.privacy import distdp

    sizes: list[int] = []
    real = distdp.polya_share_events

    def spy(n_clients, alpha, n_cells, rng):
        sizes.append(n_clients)
        return real(n_clients, alpha, n_cells, rng)

    monkeypatch.setattr(distdp, "polya_share_events", spy)
    table = _table(4)
    lost = {5: "report", 11: "report"}
    settings = RunSettings(model="distdp", height="6")  # one-phase: report rounds only
    outcome, _ = _run(table, tmp_path / "c", settings, drop=lost)
    assert outcome.rounds == 2 and outcome.reported == CLIENTS - 2 and outcome.recovered == 0
    # the first round's 18 survivors drew shares for 20; the re-run's 18 for 18
    assert sizes == [CLIENTS] * (CLIENTS - 2) + [CLIENTS - 2] * (CLIENTS - 2)


def test_too_few_clients_is_refused(tmp_path):
    table = _table(5, clients=6)
    with pytest.raises(ProtocolError, match="cohort needs at least 10"):
        _run(table, tmp_path / "c", RunSettings(model="federated"))
    lost = {i: "report" for i in range(CLIENTS - 9)}
    with pytest.raises(ProtocolError, match="at least 10"):
        _run(_table(5), tmp_path / "d", RunSettings(model="distdp", height="5"), drop=lost)


# ------------------------------------------------------------------------------------------
# Every model, relation and unit: the release states its claim, and holds what it may


CONFIGS = [
    dict(model="federated"),
    dict(model="distdp"),  # two-phase auto: the probe round, then the tree
    dict(model="distdp", relation="replace", height="5"),
    dict(model="distdp", unit="client", max_examples=3),
    dict(model="localdp"),  # two-phase auto
    dict(model="localdp", unit="client", max_examples=3, height="4"),
    dict(model="localdp", unit="client", max_examples=2),  # auto with padding
]


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: "-".join(map(str, o.values())))
def test_every_configuration_releases_its_stated_claim(options, tmp_path):
    settings = RunSettings(**options)
    outcome, view = _run(_table(6), tmp_path / "c", settings, record=True)
    release = outcome.release
    doc = release_dict(release, outcome.axis)
    mech = mechanism_from_section(doc["privacy"])  # exactly what its configuration implies
    cfg = release.config
    assert (cfg.model.value, cfg.unit.value) == (options["model"], options.get("unit", "example"))
    assert mech.seeded is False and doc["privacy"]["reproducible_simulation"] is False
    assert "seed" not in audit.all_keys(doc)
    assert cfg.probed == (
        options.get("height", "auto") == "auto" and cfg.model.value != "federated"
    )
    if cfg.probed:
        assert (
            release.probe is not None and "probe" in (view or {}).get("probe#replies", 0) * "probe"
        )
    if not mech.clients_public:
        assert "n_clients" not in doc
    if cfg.model.value == "distdp":
        assert "reporters" not in doc  # no exact count under distdp
    # what evaluate --from reads back
    path = tmp_path / "r.fedeval"
    save_release(path, release, outcome.axis)
    back, axis = load_release(path)
    assert np.array_equal(back.counts, release.counts) and axis == outcome.axis


def test_a_seeded_simulation_says_it_is_not_private(tmp_path):
    outcome, _ = _run(_table(7), tmp_path / "c", RunSettings(model="distdp", seed=5))
    doc = release_dict(outcome.release, outcome.axis)
    assert doc["privacy"]["reproducible_simulation"] is True
    assert "NOT private" in doc["privacy"]["guarantee"]


# ------------------------------------------------------------------------------------------
# The client's own checks


def test_masks_agreed_between_clients_cancel_in_the_sum():
    n, length = 7, 50
    k = secagg.neighbours_per_side(n)
    pairs = [protocol.make_key_pair() for _ in range(n)]
    publics = {i: pub for i, (_, pub) in enumerate(pairs)}
    total = np.zeros(length, np.uint32)
    masks = []
    for i, (private, _) in enumerate(pairs):
        m = protocol.client_masks(private, i, n, k, publics, b"round-1", length)
        masks.append(m)
        total += m
    assert not total.any()
    assert len({m.tobytes() for m in masks}) == n and all(m.any() for m in masks)
    # another round's masks are unrelated
    other = protocol.client_masks(pairs[0][0], 0, n, k, publics, b"round-2", length)
    assert not np.array_equal(other, masks[0])


def _client_state(tmp_path: Path):
    path = _write({"score": np.array([0.2, 0.7]), "label": np.array([0, 1])}, tmp_path / "c.pq")
    state: dict[str, bytes] = {}
    data = ClientData(str(path))
    reply = protocol.client_step({"step": "keys", "round": b"r" * 16}, state, data)
    return state, data, reply


def test_a_client_refuses_to_reveal_every_key_or_keys_it_does_not_hold(tmp_path):
    state, data, _ = _client_state(tmp_path)
    others = [protocol.make_key_pair()[1] for _ in range(4)]
    job = RunSettings(model="federated").job().to_text()
    base = {"step": "reveal", "round": b"r" * 16, "job": job, "index": 0, "n": 5, "k": 1}
    keys = np.stack([np.frombuffer(p, np.uint8) for p in others[:2]])
    every = base | {"pairs": np.array([[0, 1], [4, 0]]), "publics": keys}
    with pytest.raises(UsageError, match="every pair key"):
        protocol.client_step(every, state, data)
    not_mine = base | {"pairs": np.array([[1, 2]]), "publics": keys[:1]}
    with pytest.raises(UsageError, match="does not hold"):
        protocol.client_step(not_mine, state, data)
    one = base | {"pairs": np.array([[0, 1]]), "publics": keys[:1]}
    assert protocol.client_step(one, state, data)["keys"].shape == (1, 32)


def test_a_client_never_answers_one_round_twice(tmp_path):
    state, data, _ = _client_state(tmp_path)
    job = RunSettings(model="localdp", height="3").job()
    cfg = json.dumps(config_dict(job.config) | {"probe_share": 0.0})
    req = {"step": "report", "round": b"r" * 16, "job": job.to_text(), "index": 0, "n": 1}
    req |= {"k": 0, "attempt": 1, "config": cfg}
    first = protocol.client_step(req, state, data)
    assert int(first["levels"].sum()) == 2
    with pytest.raises(UsageError, match="twice"):
        protocol.client_step(req, state, data)


def test_a_client_error_reaches_the_server_as_a_bare_refusal(tmp_path):
    """A broken row is the client's business: the server learns only that it did not take
    part (a message naming the row would tell it about the data), and recovers without it."""
    from fedeval.flower.client_app import REFUSED

    table = _table(8)
    ids = _split(table, tmp_path / "c")
    bad = pa.table({"score": [0.5, float("nan")], "label": [0, 1]})
    pq.write_table(bad, tmp_path / "c" / "4.parquet")
    fed = InProcessFederation(tmp_path / "c", len(ids), partitions=ids)
    outcome = ServerProtocol(RunSettings(model="federated").job(), fed.send).run(fed.node_ids)
    assert outcome.reported == CLIENTS - 1 and outcome.recovered == 1
    node = next(n for n, p in fed.partition.items() if p == 4)
    job = RunSettings(model="federated").job()
    cfg = json.dumps(config_dict(job.config))
    fed.ask(node, {"step": "keys", "round": b"z" * 16})
    request = {"step": "report", "round": b"z" * 16, "job": job.to_text(), "index": 0, "n": 2}
    request |= {"k": 1, "attempt": 99, "config": cfg, "neighbours": np.array([1, 1])}
    request |= {"publics": np.zeros((2, 32), np.uint8)}
    reply = fed.ask(node, request)
    assert reply.has_error() and reply.error.reason == REFUSED


# ------------------------------------------------------------------------------------------
# Privacy: what the Flower server and the analyst receive does not separate neighbours

SCAN = [
    audit.Scenario("distdp", "add-remove", clients=CLIENTS),
    audit.Scenario("distdp", "replace", "client", 2, clients=CLIENTS),
    audit.Scenario("distdp", "add-remove", "client", 2, clients=CLIENTS),
    audit.Scenario("distdp", "add-remove", height="auto", clients=CLIENTS),
    audit.Scenario("localdp", "replace", "client", 2, short_client=True, clients=CLIENTS),
    audit.Scenario("localdp", "replace", height="auto", clients=CLIENTS),
]


def _scan_run(scenario: audit.Scenario, table, where: Path, broken: bool = False):
    settings = RunSettings(
        model=scenario.model,
        epsilon=scenario.epsilon,
        height=str(scenario.height),
        shape="hierarchy",
        unit=scenario.unit,
        max_examples=scenario.max_examples,
        relation=scenario.relation,
        min_cohort=2,
    )
    outcome, server = _run(table, where, settings, record=True)
    doc = release_dict(outcome.release, outcome.axis)
    analyst = audit.flatten(doc, "release")
    ev = evaluate_run(Simulated.from_release(outcome.release, outcome.axis, ci_draws=20))
    analyst |= audit.flatten(to_dict(ev, source="release"), "evaluate")
    return server, analyst


def _participation(path: str) -> bool:
    """Who takes part (add-remove of a whole client): public, as the guarantee says."""
    return ".holder0." in path or path.endswith("#replies")


@pytest.mark.parametrize("scenario", SCAN, ids=lambda s: s.name)
def test_no_flower_message_or_release_separates_neighbours(scenario, tmp_path, scan_runs):
    d, dp = scenario.datasets()
    views: dict[str, list] = {"D": [], "D′": []}

    def runs(first: int, count: int):
        for side, table in (("D", d), ("D′", dp)):
            for i in range(first, first + count):
                views[side].append(_scan_run(scenario, table, tmp_path / f"{side}{i}"))
        ignore = _participation if scenario.changes_participation else (lambda p: False)
        server = audit.deterministic_leaks(
            [s for s, _ in views["D"]], [s for s, _ in views["D′"]], ignore
        )
        analyst = audit.deterministic_leaks([a for _, a in views["D"]], [a for _, a in views["D′"]])
        return server, analyst

    server, analyst = runs(0, scan_runs)
    if server or analyst:  # confirm: a noisy field looks constant by chance (see test_audit)
        server, analyst = runs(scan_runs, scan_runs)
    assert server == [], f"the Flower server's messages separate D from D′: {server}"
    assert analyst == [], f"the analyst's documents separate D from D′: {analyst}"
    for s, a in views["D"]:
        assert s, "the server received nothing"
        assert a.get("release.privacy.reproducible_simulation") is False


def test_the_scan_catches_an_exact_count_in_a_client_reply(tmp_path, monkeypatch, scan_runs):
    """Control: a client that tells the server its number of rows beside its masked report."""
    real = protocol.client_step

    def leaky(request, state, data, **kw):
        reply = real(request, state, data, **kw)
        if request["step"] == "report":
            reply["rows"] = int(pq.read_metadata(data.path).num_rows)
        return reply

    monkeypatch.setattr("fedeval.flower.client_app.client_step", leaky)
    scenario = audit.Scenario("distdp", "add-remove", clients=CLIENTS)
    d, dp = scenario.datasets()
    views = {
        side: [_scan_run(scenario, t, tmp_path / f"{side}{i}")[0] for i in range(3)]
        for side, t in (("D", d), ("D′", dp))
    }
    leaks = audit.deterministic_leaks(views["D"], views["D′"])
    assert any(".holder0.rows" in leak for leak in leaks), leaks


# ------------------------------------------------------------------------------------------
# The command line


def _cli(*args):
    import fedeval.cli.flower  # noqa: F401  (registered by fedeval.cli as well)
    from fedeval.cli import app

    return runner.invoke(app, [str(a) for a in args])


def test_simulate_prints_what_evaluate_from_prints(tmp_path):
    src = _write({k: v for k, v in _table(9).items() if k != "client"}, tmp_path / "s.parquet")
    release = tmp_path / "r.fedeval"
    sim = _cli(
        "flower", "simulate", src, "--clients", CLIENTS, "--model", "federated",
        "--engine", "in-process", "--save-release", release, "--format", "json", "--seed", 4,
    )  # fmt: skip
    assert sim.exit_code == 0, sim.output
    back = _cli("evaluate", "--from", release, "--format", "json", "--seed", 4)
    assert back.exit_code == 0, back.output
    assert sim.stdout == back.stdout
    one = json.loads(_cli("evaluate", src, "--model", "federated", "-f", "json").stdout)
    got = json.loads(sim.stdout)
    assert got["metrics"]["auc"]["estimate"] == one["metrics"]["auc"]["estimate"]
    assert [t["threshold"] for t in got["metrics"]["thresholds"]] == [
        t["threshold"] for t in one["metrics"]["thresholds"]
    ]


def test_simulate_refuses_bad_input_with_exit_2_and_writes_nothing(tmp_path):
    src = _write({k: v for k, v in _table(10).items() if k != "client"}, tmp_path / "s.parquet")
    release = tmp_path / "r.fedeval"
    base = ["flower", "simulate", src, "--engine", "in-process", "--save-release", release]
    no_k = _cli(*base, "--model", "federated")
    assert no_k.exit_code == 2 and "--clients" in no_k.output
    small = _cli(*base, "--clients", 5, "--model", "federated")
    assert small.exit_code == 2 and "at least 10" in small.output
    bad = _cli(*base, "--clients", CLIENTS, "--thresholds", "0.5,2")
    assert bad.exit_code == 2
    assert not release.exists()


def test_new_writes_a_flower_project_with_the_exact_commands(tmp_path):
    out = _cli("flower", "new", tmp_path / "app", "--model", "distdp", "--epsilon", 2)
    assert out.exit_code == 0, out.output
    doc = tomllib.loads((tmp_path / "app/pyproject.toml").read_text())
    flwr = doc["tool"]["flwr"]["app"]
    assert flwr["components"] == {
        "serverapp": "fedeval.flower.server_app:app",
        "clientapp": "fedeval.flower.client_app:app",
    }
    settings = RunSettings.from_run_config(flwr["config"])
    assert settings == RunSettings(model="distdp", epsilon=2.0)
    readme = (tmp_path / "app/README.md").read_text()
    for command in ("flower-superlink --insecure", "flower-supernode --insecure", "--node-config",
                    "flwr run . fedeval", "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1",
                    "fedeval evaluate --from"):  # fmt: skip
        assert command in readme
    again = _cli("flower", "new", tmp_path / "app")
    assert again.exit_code == 2


def test_run_config_round_trips_every_setting():
    s = RunSettings(
        model="localdp", epsilon=3.0, height="5", shape="flat", unit="client", max_examples=4,
        relation="replace", score_range=(-2.0, 3.5), thresholds=(0.1, 1.0 / 3), pos_label="spam",
        seed=9, min_cohort=4, neighbours=3, retries=1, reply_timeout=30.0,
    )  # fmt: skip
    assert RunSettings.from_run_config(s.to_run_config()) == s
    split = RunSettings(model="distdp", thresholds=(0.25, 0.5), level_split="2:0.7")
    assert RunSettings.from_run_config(split.to_run_config()) == split
    config = split.job().config  # the clients' configuration carries the split
    assert (config.split_level, config.split_share) == (2, 0.7)
    assert RunSettings.from_run_config({}).level_split == RunSettings().level_split == "auto"


def test_import_fedeval_does_not_import_flower():
    code = "import sys, fedeval, fedeval.cli; assert 'flwr' not in sys.modules, 'flwr imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("app", ["server_app", "client_app"])
def test_each_flower_app_imports_first_in_a_cold_interpreter(app):
    # The deployment test (test_flower_engine.py) runs its tasks forked from one warm process
    # that imports both apps; Flower's default isolation starts each app in a fresh one.
    pytest.importorskip("flwr")
    code = f"import fedeval.flower.{app} as m; assert m.app is not None"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_the_extra_the_commands_say_how_to_install_it(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "flwr" else real(name, *a)
    )
    out = _cli("flower", "new", tmp_path / "x")
    assert out.exit_code == 2 and "fedeval[flower]" in out.output
    assert not (tmp_path / "x").exists()


def test_a_client_refuses_to_send_its_report_without_masks(tmp_path):
    """Bare reports (what benchmarks/flower.py measures the masks against) are answered only by
    a client set up for that measurement; a server cannot ask a deployed client for them."""
    state, data, _ = _client_state(tmp_path)
    for masks, k in ((False, 0), (True, 0)):
        job = RunSettings(model="federated", masks=masks).job()
        cfg = json.dumps(config_dict(job.config))
        req = {"step": "report", "round": b"r" * 16, "job": job.to_text(), "index": 0, "n": 5}
        req |= {"k": k, "attempt": 1 + masks, "config": cfg}
        req |= {"neighbours": np.zeros(0, np.int64), "publics": np.zeros((0, 32), np.uint8)}
        with pytest.raises(UsageError, match="without secure-aggregation masks"):
            protocol.client_step(req, state, data)
    allowed = protocol.client_step(req | {"attempt": 7}, state, data, allow_unmasked=True)
    assert int(allowed["masked"].view(np.int32).sum()) == 2 * len(job.config.levels)


def test_simulate_signs_the_release_it_saves(tmp_path):
    src = _write(_table(11), tmp_path / "s.parquet")  # its client column makes the 20 clients
    assert _cli("keygen", "-o", tmp_path / "k").exit_code == 0
    release = tmp_path / "r.fedeval"
    sim = _cli(
        "flower", "simulate", src, "--model", "distdp", "--engine", "in-process",
        "--save-release", release, "--sign-key", tmp_path / "k.key", "-f", "json",
    )  # fmt: skip
    assert sim.exit_code == 0, sim.output
    ok = _cli("evaluate", "--from", release, "--verify-key", tmp_path / "k.pub", "-f", "json")
    assert ok.exit_code == 0, ok.output
    assert _cli("keygen", "-o", tmp_path / "other").exit_code == 0
    bad = _cli("evaluate", "--from", release, "--verify-key", tmp_path / "other.pub")
    assert bad.exit_code == 2
    wrong_k = _cli("flower", "simulate", src, "--clients", 7, "--engine", "in-process")
    assert wrong_k.exit_code == 2 and "20 clients" in wrong_k.output


def test_a_seeded_simulation_is_reproducible_whatever_the_node_ids(tmp_path):
    """--seed keys each simulated client's noise by its partition, not by the random node id
    (or roster place) the engine gave it: two runs, two sets of node ids, one release."""
    settings = RunSettings(model="distdp", seed=11)  # two-phase: probe and tree noise
    a, _ = _run(_table(12), tmp_path / "a", settings)
    b, _ = _run(_table(12), tmp_path / "b", settings)
    assert np.array_equal(a.release.counts, b.release.counts)
    assert np.array_equal(a.release.probe.counts, b.release.probe.counts)
    c, _ = _run(_table(12), tmp_path / "c", RunSettings(model="distdp", seed=12))
    assert not np.array_equal(a.release.counts, c.release.counts)
