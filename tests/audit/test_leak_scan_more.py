"""The deterministic leak scan widened to every other document a party receives.

`test_audit.test_no_document_separates_neighbours` reads the JSON documents (reports,
manifests, releases, estimates, maps, ledger entries) and aggregate's stderr. This module reads
the rest, as each party would see it (shared AUDIT.md, section 1): the analyst's stdout and
stderr of every command in every format (tables, CSV, files written with -o), exit codes, the
figures (SVG text and elements; PNG chunks), `apply`'s output, the ledger as `fedeval ledger`
prints it, the names of the files a command creates; the server's view of the report files
below their decoded columns (row groups, chunk sizes, encodings, statistics, key-value
metadata); and `calibrate --multiclass` (FedTemp over rounds with partial participation, FedBin,
FedBBQ): its shareable map, its stdout and stderr, its ledger entry and `apply` of the map.

Each kind of document is also shown to be read, and the scan over it to fail, on a deliberately
broken mechanism (section 4). `make test` scans one binary mechanism and two multiclass
methods; `make audit` (FEDEVAL_AUDIT=full) every scenario of the main scan, with PNG figures.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval import audit
from fedeval.cli import app

FULL = os.environ.get("FEDEVAL_AUDIT") == "full"  # as conftest reads it
runner = CliRunner()

PUBLIC_SCORES = np.linspace(0.0, 1.0, 9)
"""A public table `apply` calibrates: its output is a function of the map alone."""


def _write(table: dict[str, np.ndarray], path: Path) -> Path:
    pq.write_table(pa.table({k: pa.array(v) for k, v in table.items()}), path)
    return path


def _invoke(view: dict[str, Any], name: str, where: Path, *args: Any):
    """Run one command; its exit code, stdout and stderr become fields of `view`, with the
    run's own directory written RUN (the one thing that differs between runs by design)."""
    r = runner.invoke(app, [str(a) for a in args])
    here = _run_dir(where)
    view[f"{name}.exit"] = r.exit_code
    view |= audit.text_fields(f"{name}.stderr", r.stderr, here)
    if r.stdout.startswith("{"):  # a JSON document (or error): its leaves
        text = r.stdout
        for old, new in here.items():
            text = text.replace(old, new)
        view |= audit.flatten(json.loads(audit.without_clock(text)), f"{name}.json")
    else:
        view |= audit.text_fields(f"{name}.stdout", r.stdout, here)
    return r


def _show(leaks: list[str], most: int = 12) -> str:
    """The first leaks found, and how many more (a broken document can flag hundreds)."""
    more = f" … and {len(leaks) - most} more" if len(leaks) > most else ""
    return "; ".join(leaks[:most]) + more


def _run_dir(where: Path) -> dict[str, str]:
    """The run's own directory, as text and as JSON escapes it, → RUN."""
    return {json.dumps(str(where))[1:-1]: "RUN", str(where): "RUN"}


def _read_outputs(view: dict[str, Any], out: Path, where: Path) -> None:
    """Every file in `out` as its reader sees it: the file names, and each file's fields."""
    view["out#files"] = sorted(p.name for p in out.iterdir())
    for p in sorted(out.iterdir()):
        data = p.read_bytes()
        name = f"out/{p.name}"
        if p.suffix == ".svg":
            view |= audit.svg_fields(name, data)
        elif p.suffix == ".png":
            view |= audit.png_fields(name, data)
        elif p.suffix in (".json", ".fedeval"):
            text = data.decode()
            for old, new in _run_dir(where).items():
                text = text.replace(old, new)
            view |= audit.flatten(json.loads(audit.without_clock(text)), name)
        elif p.suffix == ".parquet":
            view |= audit.parquet_fields(name, data) | audit.parquet_layout_fields(name, data)
        else:  # CSV and any other text
            view |= audit.text_fields(name, data.decode(), _run_dir(where))


def _binary_run(scenario: audit.Scenario, table: dict, where: Path, full: bool):
    """One unseeded run of every binary command on `table`: (the server's view of the report
    files below their columns, the analyst's view of every other output)."""
    src = _write(table, where / "data.parquet")
    common: list[Any] = [
        "-m", scenario.model, "-e", scenario.epsilon, "--height", scenario.height,
        "--shape", "hierarchy", "--relation", scenario.relation, "--unit", scenario.unit,
    ]  # fmt: skip
    if scenario.max_examples:
        common += ["--max-examples", scenario.max_examples]
    reports, release, out = where / "reports", where / "run.fedeval", where / "out"
    out.mkdir()
    scratch: dict[str, Any] = {}  # the data holder's own view (encode): not scanned
    _invoke(scratch, "encode", where, "encode", src, "-o", reports, "--min-cohort", 2, *common)
    server: dict[str, Any] = {}
    for p in sorted(reports.glob("*.parquet")):
        server |= audit.parquet_layout_fields(p.name, p.read_bytes())
    r = _invoke(server, "aggregate", where, "aggregate", reports, "-o", release, "--min-cohort", 2)
    assert r.exit_code == 0, r.output
    a: dict[str, Any] = {}
    draws = ("--ci-draws", 20)
    # Staged: estimates from the saved release, in every format and to files.
    plot = ("--plot", out / "curves.svg") if full else ()
    _invoke(a, "evaluate", where, "evaluate", "--from", release, *draws, *plot)
    _invoke(a, "curves", where, "curves", "--from", release, *draws)
    _invoke(a, "curves-csv", where, "curves", "--from", release, *draws, "-f", "csv")
    _invoke(a, "curves-o", where, "curves", "--from", release, *draws, "-o", out / "cu.csv")
    _invoke(a, "calibrate", where, "calibrate", "--from", release, *draws, "-o", out / "map.json")
    _invoke(a, "calibrate-table", where, "calibrate", "--from", release, *draws)
    if (out / "map.json").exists():
        public = _write({"score": PUBLIC_SCORES}, where / "public.parquet")
        _invoke(a, "apply", where, "apply", out / "map.json", public)
        if full:
            _invoke(a, "apply-o", where, "apply", out / "map.json", public,
                    "-o", out / "cal.parquet")  # fmt: skip
    # One-shot simulations that show no exact value (--no-exact), charged to a ledger.
    ledger = where / "ledger.jsonl"
    charge = ("--no-exact", *draws, *common, "--ledger", ledger, "--budget", 100)
    _invoke(a, "one-evaluate", where, "evaluate", src, *charge)
    # The per-client path materialises every report (padding included) before summing.
    _invoke(a, "per-client", where, "evaluate", src, "--per-client", "--no-exact", *draws,
            *common, "-f", "json", "--save-release", out / "per-client.fedeval")  # fmt: skip
    plot = ("--plot", out / "rel.svg") if full else ()
    _invoke(a, "one-calibrate", where, "calibrate", src, *charge, *plot)
    if full:
        _invoke(a, "one-curves", where, "curves", src, *charge, "--plot", out / "one.svg")
        _invoke(a, "curves-png", where, "curves", "--from", release, *draws,
                "--plot", out / "curves.png")  # fmt: skip
        _invoke(a, "calibrate-png", where, "calibrate", "--from", release, *draws,
                "--plot", out / "rel.png", "-f", "json")  # fmt: skip
        _invoke(a, "evaluate-json", where, "evaluate", "--from", release, *draws, "-f", "json")
        _invoke(a, "evaluate-o", where, "evaluate", "--from", release, *draws,
                "-o", out / "ev.json")  # fmt: skip
        # The other estimators and gates read the same release.
        _invoke(a, "buckets", where, "evaluate", "--from", release, *draws, "--buckets", 4,
                "--fail-under", "auc=0.5", "--fail-over", "ece=0.3")  # fmt: skip
        _invoke(a, "pchip", where, "curves", "--from", release, *draws, "--curve-method",
                "pchip", "-q", 4, "-f", "json")  # fmt: skip
        _invoke(a, "bbq", where, "calibrate", "--from", release, *draws, "--method", "bbq")
        for cmd in ("curves", "calibrate"):
            _invoke(
                a, f"one-{cmd}-json", where, cmd, src, "--no-exact", *draws, *common, "-f", "json"
            )
    _invoke(a, "ledger", where, "ledger", ledger)
    _invoke(a, "ledger-json", where, "ledger", ledger, "-f", "json")
    _read_outputs(a, out, where)
    a["run#files"] = sorted(p.name for p in where.iterdir())
    return server, a


def _views(run, d: dict, dp: dict, tmp: Path, first: int, count: int, views: dict) -> None:
    for side, table in (("D", d), ("D′", dp)):
        for i in range(first, first + count):
            where = tmp / f"{side}{i}"
            where.mkdir()
            views[side].append(run(table, where))


def _scan(run, d: dict, dp: dict, tmp: Path, runs: int, ignore=lambda p: False, confirm=True):
    """Leaks over `runs` unseeded runs per side of `run(table, where) -> (server, analyst)`,
    confirmed over as many again when any is found (a field that only post-processes noise can
    look separating by chance: `test_audit._scan`; a control that expects a leak need not
    confirm it). Returns (server leaks, analyst leaks, views)."""
    views: dict[str, list] = {"D": [], "D′": []}

    def leaks() -> tuple[list[str], list[str]]:
        server = audit.deterministic_leaks(
            [s for s, _ in views["D"]], [s for s, _ in views["D′"]], ignore
        )
        analyst = audit.deterministic_leaks([a for _, a in views["D"]], [a for _, a in views["D′"]])
        return server, analyst

    _views(run, d, dp, tmp, 0, runs, views)
    server, analyst = leaks()
    if confirm and (server or analyst):
        _views(run, d, dp, tmp, runs, runs, views)
        server, analyst = leaks()
    return server, analyst, views


def _participation(path: str) -> bool:
    """Who takes part is public to the server under add-remove of a client (as in test_audit):
    the rows of the report parts and the roster are one per client, and aggregate says how
    many clients reported."""
    return path.startswith(("roster.parquet", "part-", "aggregate.stderr"))


# `make test`: add-remove of a client (its size and presence secret, every estimate succeeds at
# this size, so every output is read); `make audit`: every scenario of the main scan, and the
# padding of localdp unit client at its default ε (at ε = 1 most of its tiny releases hold no
# positive or no negative and every estimate exits 2).
BINARY = (
    [
        *[s for s in audit.all_scenarios() if not s.two_phase],
        audit.Scenario("localdp", "replace", "client", 2, short_client=True),
        audit.Scenario("localdp", "replace", "client", 2, short_client=True, epsilon=5.0),
        audit.Scenario("distdp", "add-remove", height="auto"),
        audit.Scenario("localdp", "replace", "client", 2, height="auto"),
    ]
    if FULL
    else [audit.Scenario("distdp", "add-remove", "client", 2)]
)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", BINARY, ids=lambda s: f"{s.name}, ε = {s.epsilon:g}")
def test_no_output_of_any_command_separates_neighbours(scenario, tmp_path, scan_runs):
    d, dp = scenario.datasets()
    ignore = _participation if scenario.changes_participation else (lambda p: False)
    server, analyst, views = _scan(
        lambda t, w: _binary_run(scenario, t, w, FULL), d, dp, tmp_path, scan_runs, ignore
    )
    assert analyst == [], f"the analyst's outputs separate D from D′: {_show(analyst)}"
    assert server == [], f"the report files' layout separates D from D′: {_show(server)}"
    # Every kind of document was read in some run (a scan of nothing passes).
    seen = {k for _, a in views["D"] for k in a}
    for prefix in ("ledger.stdout:", "one-evaluate.stdout:", "one-evaluate.stderr:",
                   "curves-csv.stdout:", "out/cu.csv:", "out/per-client.fedeval.counts",
                   *(("out/rel.svg.text:", "out/curves.png.IHDR") if FULL else ())):  # fmt: skip
        assert any(k.startswith(prefix) for k in seen), f"nothing read from {prefix}"
    assert any(k.endswith("#row_groups") for k in views["D"][0][0])
    assert any(k.endswith(".exit") for k in seen)


def test_one_shot_refusal_does_not_read_the_exact_labels(tmp_path, scan_runs):
    """Add-remove of one example: D holds one positive among ten negatives, D′ none. What the
    one-shot prints (or refuses to) under DP must depend on its release, as `--from` does."""
    score = np.linspace(0.05, 0.95, 11)
    label = (np.arange(11) == 0).astype(np.int64)
    d = {"score": score, "label": label}
    dp = {"score": score[1:], "label": label[1:]}

    def run(table, where):
        src = _write(table, where / "data.parquet")
        a: dict[str, Any] = {}
        _invoke(a, "evaluate", where, "evaluate", src, "-m", "distdp", "--height", 2,
                "--no-exact", "--ci-draws", 0, "-f", "json")  # fmt: skip
        return {}, a

    _, analyst, _ = _scan(run, d, dp, tmp_path, scan_runs)
    assert analyst == [], f"the one-shot's outputs separate D from D′: {_show(analyst)}"


def test_text_and_figure_scans_catch_an_exact_count(tmp_path, monkeypatch):
    """Broken on purpose: an add-remove simulation that shows the exact number of examples in
    its table and its figure's title (as if that number were public), and warns on stderr
    how many rows it read."""
    import importlib
    import warnings

    from fedeval.privacy.mechanism import Mechanism

    monkeypatch.setattr(Mechanism, "examples_public", property(lambda self: True))
    module = importlib.import_module(
        "fedeval.api.evaluate"
    )  # the package's `evaluate` is a function
    evaluate_file = module.evaluate_file

    def telling(*args, **kw):
        result = evaluate_file(*args, **kw)
        warnings.warn(f"read {result.rows} rows", stacklevel=2)
        return result

    monkeypatch.setattr(module, "evaluate_file", telling)
    scenario = audit.Scenario("distdp", "add-remove")
    d, dp = scenario.datasets()

    def run(table, where):
        src = _write(table, where / "data.parquet")
        view: dict[str, Any] = {}
        out = where / "out"
        out.mkdir()
        _invoke(view, "one", where, "evaluate", src, "-m", "distdp", "--height", 2, "--shape",
                "hierarchy", "--no-exact", "--ci-draws", 0, "--plot", out / "c.svg")  # fmt: skip
        _read_outputs(view, out, where)
        return {}, view

    _, analyst, _ = _scan(run, d, dp, tmp_path, 2, confirm=False)
    assert any(k.startswith("one.stdout:") for k in analyst), analyst
    assert any(k.startswith("one.stderr:") for k in analyst), analyst
    assert any(k.startswith("out/c.svg.text:") for k in analyst), analyst


def test_png_scan_catches_a_count_in_the_metadata(tmp_path, monkeypatch):
    """Broken on purpose: a PNG that stores its title (here with the exact number of examples)
    in a text chunk, where no one looking at the picture would see it."""
    from matplotlib.figure import Figure

    from fedeval.privacy.mechanism import Mechanism

    monkeypatch.setattr(Mechanism, "examples_public", property(lambda self: True))
    save = Figure.savefig

    def with_title(self, *args, **kw):
        if kw.get("format") == "png" and self._suptitle is not None:
            kw["metadata"] = {"Title": self._suptitle.get_text()}
        return save(self, *args, **kw)

    monkeypatch.setattr(Figure, "savefig", with_title)
    d, dp = audit.Scenario("distdp", "add-remove").datasets()

    def run(table, where):
        src = _write(table, where / "data.parquet")
        out = where / "out"
        out.mkdir()
        r = runner.invoke(app, [str(a) for a in ("curves", src, "-m", "distdp", "--height", 2,
                          "--no-exact", "--ci-draws", 0, "--plot", out / "c.png")])  # fmt: skip
        assert r.exit_code == 0, r.output
        view: dict[str, Any] = {}
        _read_outputs(view, out, where)
        return {}, view

    _, analyst, _ = _scan(run, d, dp, tmp_path, 2, confirm=False)
    assert any(k.startswith(("out/c.png.tEXt", "out/c.png.iTXt")) for k in analyst), analyst


def test_layout_scan_catches_reports_without_padding(tmp_path, monkeypatch):
    """Broken on purpose: localdp unit client without its empty reports, so a client with fewer
    than L examples sends fewer reports: the report file's row groups and sizes tell it."""
    from fedeval.privacy import localdp

    monkeypatch.setattr(localdp, "empty_reports", lambda *args, **kw: 0)
    scenario = audit.Scenario("localdp", "replace", "client", 2, short_client=True)
    d, dp = scenario.datasets()

    def run(table, where):
        src = _write(table, where / "data.parquet")
        args = ["-m", "localdp", "--height", 2, "--shape", "hierarchy", "--relation",
                "replace", "--unit", "client", "--max-examples", 2]  # fmt: skip
        r = runner.invoke(app, [str(a) for a in ("encode", src, "-o", where / "r", *args)])
        assert r.exit_code == 0, r.output
        server: dict[str, Any] = {}
        for p in sorted((where / "r").glob("part-*.parquet")):
            server |= audit.parquet_layout_fields(p.name, p.read_bytes())
        return server, {}

    server, _, _ = _scan(run, d, dp, tmp_path, 2, confirm=False)
    assert any("#rows" in k for k in server), server
    assert any("#bytes" in k for k in server), server


# --------------------------------------------------------------------------------------------
# calibrate --multiclass: user-level DP, add or remove one client (K enrolled clients public)

CLASSES = 3


def _multiclass_tables() -> tuple[dict, dict]:
    """D: 10 clients of 20 examples, 3 classes, overconfident probabilities; D′: client 0's
    data replaced by a single example of another class (two add-remove steps of one client,
    K unchanged: a document that separates them deterministically breaks the claim)."""
    rng = np.random.default_rng(20261123)
    clients, per = 10, 20
    y = rng.integers(0, CLASSES, clients * per)
    z = 2.0 * (3.0 * np.eye(CLASSES)[y] + rng.normal(0.0, 1.5, (len(y), CLASSES)))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    client = np.repeat(np.arange(clients), per)
    d = {"label": y, "client": client, **{f"prob_{j}": p[:, j] for j in range(CLASSES)}}
    keep = client != 0
    keep[0] = True  # client 0 keeps one example, of another class
    dp = {k: v[keep].copy() for k, v in d.items()}
    dp["label"][0] = (dp["label"][0] + 1) % CLASSES
    return d, dp


PUBLIC_PROBS = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.98, 0.01, 0.01]])

MULTICLASS = [
    ("fedtemp", "--rounds", 4, "--participation", 0.5),
    ("fedbbq",),
    *(
        [
            ("fedbin",),
            ("fedbin", "--unweighted"),
            ("fedtemp", "--rounds", 3, "--holdout", 0),
            ("fedbbq", "--holdout", 0, "--rounds", 2, "--participation", 0.5),
        ]
        if FULL
        else []
    ),
]


def _multiclass_run(options: tuple, table: dict, where: Path):
    """One unseeded DP run of `calibrate --multiclass` writing its shareable map: the map, the
    command's stdout and stderr, the ledger entry and `fedeval ledger`'s print of it, and
    `apply` of the map to a public table. The JSON report and the table are the simulation's
    (they state exact metrics: "exact_values": true) and are not scanned."""
    src = _write(table, where / "data.parquet")
    method, *rest = options
    out = where / "out"
    out.mkdir()
    ledger = where / "ledger.jsonl"
    a: dict[str, Any] = {}
    r = _invoke(a, "calibrate", where, "calibrate", src, "--multiclass", "--method", method,
                *rest, "-e", 1, "-o", out / "map.json", "--ledger", ledger,
                "--budget", 100)  # fmt: skip
    assert r.exit_code == 0, r.output
    for j, line in enumerate(ledger.read_text().splitlines()):
        entry = {k: v for k, v in json.loads(line).items() if k not in ("time", "created")}
        a |= audit.flatten(entry, f"ledger[{j}]")
    if FULL:  # the print of a ledger is scanned with every binary run
        _invoke(a, "ledger", where, "ledger", ledger)
    public = _write(
        {f"prob_{j}": PUBLIC_PROBS[:, j] for j in range(CLASSES)}, where / "pub.parquet"
    )
    _invoke(a, "apply", where, "apply", out / "map.json", public)
    _read_outputs(a, out, where)
    return {}, a


@pytest.mark.slow
@pytest.mark.parametrize("options", MULTICLASS, ids=lambda o: " ".join(map(str, o)))
def test_no_multiclass_document_separates_neighbours(options, tmp_path, scan_runs):
    d, dp = _multiclass_tables()
    _, analyst, views = _scan(
        lambda t, w: _multiclass_run(options, t, w), d, dp, tmp_path, scan_runs
    )
    assert analyst == [], f"the multiclass documents separate D from D′: {_show(analyst)}"
    seen = views["D"][0][1]
    assert (
        seen["apply.exit"] == 0
        and seen[
            "out/map.json.calibrator" + (".temperature" if options[0] == "fedtemp" else ".bins")
        ]
        is not None
    )
    assert any(k.startswith("ledger[1].") for k in seen)
    assert not [k for k in seen if k.endswith(".seed")], "a private map names a seed"


def test_multiclass_scan_catches_exact_counts_in_the_map(tmp_path, monkeypatch):
    """Broken on purpose: the map written under DP keeps the simulation's row counts (as the
    JSON report does), so whoever receives it learns each client's size."""
    import fedeval.multiclass as multiclass

    monkeypatch.setattr(multiclass, "shareable_map", lambda doc: doc)
    d, dp = _multiclass_tables()
    _, analyst, _ = _scan(
        lambda t, w: _multiclass_run(("fedtemp", "--rounds", 2), t, w),
        d,
        dp,
        tmp_path,
        2,
        confirm=False,
    )
    assert any(k.startswith("out/map.json.data.rows") for k in analyst), analyst


def test_multiclass_no_exact_is_not_ignored(tmp_path):
    """`--no-exact` promises output without exact values; `calibrate --multiclass` cannot keep
    that promise for its report (the simulation's exact metrics and row counts), so it must
    refuse the option rather than print them: a report made that way separated D from D′
    (data.rows, fit_rows, eval_rows, and the table's "N rows" line)."""
    d, dp = _multiclass_tables()

    def run(table, where):
        src = _write(table, where / "data.parquet")
        a: dict[str, Any] = {}
        r = _invoke(a, "json", where, "calibrate", src, "--multiclass", "--method", "fedtemp",
                    "--rounds", 2, "-e", 1, "--no-exact", "-f", "json")  # fmt: skip
        if r.exit_code == 0:
            a |= audit.flatten(json.loads(r.stdout), "report")
        return {}, a

    _, analyst, views = _scan(run, d, dp, tmp_path, 2)
    assert analyst == [], f"a --no-exact report separates D from D′: {_show(analyst)}"
    view = views["D"][0][1]
    assert view["json.exit"] == 2
    assert any("--no-exact" in k for k in view if k.startswith("json.stderr:")), view
