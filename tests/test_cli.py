"""The `fedeval` command, driven through Typer's CliRunner (stdout and stderr kept apart).

Every run happens in a temporary working directory with relative file names, so messages name
the file exactly as it was given.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import fedeval
from fedeval.cli import app

N = 300
SEED = 7
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

WIDE = {"COLUMNS": "200"}

runner = CliRunner()


def flat(text: str) -> str:
    """Text without colour codes, every run of whitespace as one space (rich wraps at 80)."""
    return " ".join(ANSI.sub("", text).split())


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), input=input, env=env)


def run_json(*args: str, input: str | None = None) -> dict:
    result = invoke("evaluate", *args, "--format", "json", input=input)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def make_data(n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 2).astype(np.int64)
    s = np.clip(0.3 * y + 0.7 * rng.random(n), 0.0, 1.0)
    return y, s


def write_parquet(path: Path | str, **columns) -> Path:
    pq.write_table(pa.table(columns), path)
    return Path(path)


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def scores(workdir) -> str:
    y, s = make_data()
    write_parquet("scores.parquet", score=s, label=y)
    return "scores.parquet"


def all_estimates(doc: dict) -> list[float | None]:
    m = doc["metrics"]
    out = [m["auc"]["estimate"]]
    for t in m["thresholds"]:
        out += [t[k]["estimate"] for k in ("precision", "recall", "accuracy")]
    return out


# --- help and version ------------------------------------------------------------------------


def test_help_mentions_exit_codes_and_command():
    result = invoke("--help")
    assert result.exit_code == 0
    text = flat(result.stdout)
    assert (
        "Exit codes: 0 ok · 1 a quality gate failed · 2 bad input or usage · 70 internal error."
        in text
    )
    assert "evaluate" in text
    assert "--version" in text


def test_evaluate_help_lists_options():
    result = invoke("evaluate", "--help", env=WIDE)  # narrow help truncates option names
    assert result.exit_code == 0
    text = flat(result.stdout)
    assert "Usage: fedeval evaluate" in text
    for option in (
        "--model",
        "--epsilon",
        "--thresholds",
        "--seed",
        "--format",
        "--output",
        "--score-col",
        "--label-col",
        "--client-col",
        "--score-range",
        "--pos-label",
        "--per-client",
    ):
        assert option in text, option
    for model in ("federated", "distdp", "localdp"):
        assert model in text


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"fedeval {fedeval.__version__}\n"


def test_no_arguments_shows_help_and_is_a_usage_error():
    result = invoke()
    assert result.exit_code == 2
    assert "Usage: fedeval" in flat(result.stdout + result.stderr)


# --- the JSON report -------------------------------------------------------------------------


def test_per_client_run_leaves_stderr_empty_off_a_terminal(scores):
    # The per-client encoder's progress bar is drawn only on a terminal: off one, even a
    # transient bar left a newline on stderr.
    args = ("evaluate", scores, "--per-client", "--model", "localdp", "--format", "json")
    result = invoke(*args, "--seed", str(SEED))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert json.loads(result.stdout)["run"]["path"] == "per-client"


def test_json_report_is_one_document_with_the_schema(scores):
    result = invoke("evaluate", scores, "--format", "json", "--seed", str(SEED))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    doc = json.loads(result.stdout)  # the whole of stdout is one JSON document
    assert doc["schema"] == "fedeval.report/2"
    assert doc["fedeval_version"] == fedeval.__version__

    privacy = doc["privacy"]
    for key in ("model", "epsilon", "delta", "unit", "mechanism", "height", "buckets"):
        assert key in privacy, key
    assert privacy["model"] == "distdp"
    assert privacy["unit"] == "example"
    assert isinstance(privacy["mechanism"], dict) and privacy["mechanism"]["name"]
    assert isinstance(privacy["height"], int) and privacy["height"] >= 1
    assert isinstance(privacy["buckets"], int) and privacy["buckets"] >= 1

    assert doc["data"]["rows"] == N
    assert doc["data"]["clients"] == N  # no client column: one example per client
    assert doc["data"]["source"] == scores
    assert doc["run"] == {"seed": SEED, "path": "fast", "reproducible_simulation": True}

    auc = doc["metrics"]["auc"]
    assert set(auc) >= {"estimate", "exact", "abs_error"}
    assert 0.0 <= auc["estimate"] <= 1.0
    assert 0.5 < auc["exact"] < 1.0
    assert auc["abs_error"] == pytest.approx(abs(auc["estimate"] - auc["exact"]))

    for row in doc["metrics"]["thresholds"]:
        assert isinstance(row["threshold"], float)
        for metric in ("precision", "recall", "accuracy"):
            cell = row[metric]
            assert set(cell) >= {"estimate", "exact", "abs_error"}
            assert 0.0 <= cell["estimate"] <= 1.0
            assert 0.0 <= cell["exact"] <= 1.0
            assert cell["abs_error"] == pytest.approx(abs(cell["estimate"] - cell["exact"]))


def test_exact_auc_matches_scikit_learn(scores):
    from sklearn.metrics import roc_auc_score

    y, s = make_data()
    doc = run_json(scores, "--model", "federated")
    assert doc["metrics"]["auc"]["exact"] == pytest.approx(roc_auc_score(y, s))


def test_default_thresholds_are_elevenths(scores):
    doc = run_json(scores, "--seed", str(SEED))
    got = [t["threshold"] for t in doc["metrics"]["thresholds"]]
    assert got == pytest.approx([i / 11 for i in range(1, 11)])
    assert len(got) == 10


def test_thresholds_option_gives_exactly_those(scores):
    doc = run_json(scores, "--thresholds", "0.3,0.5", "--seed", str(SEED))
    assert [t["threshold"] for t in doc["metrics"]["thresholds"]] == [0.3, 0.5]


@pytest.mark.parametrize(
    ("model", "epsilon", "delta"),
    [("federated", None, None), ("distdp", 1.0, 0.0), ("localdp", 5.0, 0.0)],
)
def test_each_model_runs_with_its_default_budget(scores, model, epsilon, delta):
    result = invoke("evaluate", scores, "--model", model, "--format", "json", "--seed", "1")
    assert result.exit_code == 0, result.stderr
    privacy = json.loads(result.stdout)["privacy"]
    assert privacy["model"] == model
    assert privacy["epsilon"] == epsilon
    assert privacy["delta"] == delta


def test_federated_estimates_are_exact_up_to_discretisation(scores):
    doc = run_json(scores, "--model", "federated")
    assert doc["data"]["positives_estimate"] == N // 2
    assert doc["data"]["negatives_estimate"] == N - N // 2
    assert doc["metrics"]["auc"]["abs_error"] < 1e-3


def test_epsilon_option_is_reported(scores):
    doc = run_json(scores, "--model", "distdp", "--epsilon", "2", "--seed", "1")
    assert doc["privacy"]["epsilon"] == 2.0


def test_large_epsilon_warns_on_stderr_only(scores):
    result = invoke("evaluate", scores, "-e", "20", "--format", "json", "--seed", "1")
    assert result.exit_code == 0
    assert flat(result.stderr).startswith("fedeval: warning: epsilon=20.0 is unusually large")
    assert json.loads(result.stdout)["privacy"]["epsilon"] == 20.0


def test_epsilon_with_federated_is_a_usage_error(scores):
    result = invoke("evaluate", scores, "--model", "federated", "--epsilon", "1", "-o", "r.json")
    assert result.exit_code == 2
    assert result.stdout == ""
    msg = flat(result.stderr)
    assert msg.startswith("fedeval: error:")
    assert "--epsilon does not apply to --model federated" in msg
    assert not Path("r.json").exists()


def test_unknown_model_is_a_usage_error(scores):
    result = invoke("evaluate", scores, "--model", "nope", "-o", "report.json")
    assert result.exit_code == 2
    assert result.stdout == ""
    msg = flat(result.stderr)
    assert "Invalid value for '--model'" in msg
    assert "nope" in msg
    assert not Path("report.json").exists()


def test_output_file_holds_the_same_document(scores):
    result = invoke(
        "evaluate", scores, "--format", "json", "--seed", str(SEED), "-o", "out/report.json"
    )
    assert result.exit_code == 0, result.stderr
    written = Path("out/report.json").read_text()
    assert result.stdout == ""  # -o PATH: the document goes there, stdout stays empty
    same = invoke("evaluate", scores, "--format", "json", "--seed", str(SEED), "-o", "-")
    assert same.exit_code == 0, same.stderr
    assert written == same.stdout
    assert json.loads(written)["schema"] == "fedeval.report/2"
    assert sorted(p.name for p in Path("out").iterdir()) == ["report.json"]


def test_output_file_with_table_format(scores):
    result = invoke("evaluate", scores, "--seed", str(SEED), "-o", "report.json")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""  # -o PATH: stdout stays empty, whatever --format
    doc = json.loads(Path("report.json").read_text())
    assert doc["run"]["seed"] == SEED


def test_same_seed_same_report(scores):
    a = invoke("evaluate", scores, "--format", "json", "--seed", "11")
    b = invoke("evaluate", scores, "--format", "json", "--seed", "11")
    assert a.exit_code == b.exit_code == 0
    assert a.stdout == b.stdout


@pytest.mark.parametrize("model", ["distdp", "localdp"])
def test_different_seed_different_estimates(scores, model):
    a = run_json(scores, "--model", model, "--seed", "11")
    b = run_json(scores, "--model", model, "--seed", "12")
    assert a["run"]["seed"] == 11 and b["run"]["seed"] == 12
    assert all_estimates(a) != all_estimates(b)
    # the exact values do not depend on the seed
    assert a["metrics"]["auc"]["exact"] == b["metrics"]["auc"]["exact"]


def test_no_seed_is_published_when_not_given(scores):
    # A private run draws its noise from the OS CSPRNG and publishes no seed; a seeded run is a
    # reproducible simulation, and says it is not private.
    doc = run_json(scores)
    assert "seed" not in doc["run"] and doc["run"]["reproducible_simulation"] is False
    assert "NOT private" not in doc["privacy"]["guarantee"]
    seeded = run_json(scores, "--seed", "5")
    assert seeded["run"]["seed"] == 5 and seeded["run"]["reproducible_simulation"] is True
    assert seeded["privacy"]["guarantee"].startswith("reproducible simulation (--seed): NOT")


def test_csv_on_stdin(workdir):
    y, s = make_data()
    csv = "score,label\n" + "".join(f"{float(a)!r},{b}\n" for a, b in zip(s, y, strict=True))
    doc = run_json("-", "--seed", str(SEED), input=csv)
    assert doc["data"]["source"] == "<stdin>"
    assert doc["data"]["rows"] == N
    parquet = write_parquet("same.parquet", score=s, label=y)
    # The same report but for the source's name (and so the seal over the whole document).
    assert doc == {
        **run_json(str(parquet), "--seed", str(SEED)),
        "data": doc["data"],
        "integrity": doc["integrity"],
    }


def test_score_range_for_scores_in_minus_one_one(workdir):
    y, s = make_data()
    write_parquet("unit.parquet", score=s, label=y)
    write_parquet("signed.parquet", score=2 * s - 1, label=y)
    refused = invoke("evaluate", "signed.parquet")
    assert refused.exit_code == 2
    assert "outside the score range [0, 1]" in flat(refused.stderr)

    doc = run_json("signed.parquet", "--score-range", "-1,1", "--model", "federated")
    thresholds = [t["threshold"] for t in doc["metrics"]["thresholds"]]
    assert thresholds == pytest.approx([-1 + 2 * i / 11 for i in range(1, 11)])
    unit = run_json("unit.parquet", "--model", "federated")
    assert doc["metrics"]["auc"]["exact"] == pytest.approx(unit["metrics"]["auc"]["exact"])


def test_pos_label_yes(workdir):
    y, s = make_data()
    write_parquet("yn.parquet", score=s, label=np.where(y == 1, "yes", "no"))
    refused = invoke("evaluate", "yn.parquet")
    assert refused.exit_code == 2
    assert "--pos-label" in flat(refused.stderr)

    doc = run_json("yn.parquet", "--pos-label", "yes", "--model", "federated")
    assert doc["data"]["positives_estimate"] == int(y.sum())
    write_parquet("01.parquet", score=s, label=y)
    assert doc["metrics"]["auc"]["exact"] == run_json("01.parquet")["metrics"]["auc"]["exact"]


def test_client_column_counts_distinct_clients(workdir):
    y, s = make_data()
    write_parquet("c.parquet", score=s, label=y, client=[f"site-{i % 7}" for i in range(N)])
    doc = run_json("c.parquet", "--seed", str(SEED))
    assert doc["data"]["clients"] == 7
    assert doc["data"]["rows"] == N
    assert "group privacy" in doc["privacy"]["note"]


def test_client_col_option(workdir):
    y, s = make_data()
    write_parquet("c.parquet", score=s, label=y, hospital=np.arange(N) % 5)
    assert run_json("c.parquet", "--seed", "1")["data"]["clients"] == N
    assert run_json("c.parquet", "--client-col", "hospital", "--seed", "1")["data"]["clients"] == 5


@pytest.mark.parametrize("model", ["distdp", "localdp", "federated"])
def test_per_client_path(workdir, model):
    y, s = make_data(200)
    write_parquet("small.parquet", score=s, label=y, client=np.arange(200) % 9)
    doc = run_json("small.parquet", "--per-client", "--model", model, "--seed", "3")
    assert doc["run"]["path"] == "per-client"
    assert doc["data"]["clients"] == 9
    assert 0.0 <= doc["metrics"]["auc"]["estimate"] <= 1.0


def test_table_format(scores):
    result = invoke("evaluate", scores, "--seed", str(SEED))
    assert result.exit_code == 0, result.stderr
    text = flat(result.stdout)
    assert "ROC AUC" in text
    assert f"{scores}: {N} examples, {N} clients" in text
    assert "model distdp, ε = 1" in text
    assert f"seed {SEED}" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


def test_no_exact(scores):
    doc = run_json(scores, "--no-exact", "--seed", "1")
    assert doc["simulation"] is True  # the release is still simulated from the raw table
    assert doc["metrics"]["auc"]["exact"] is None
    assert doc["metrics"]["auc"]["abs_error"] is None


# --- bad input: one message, exit 2, nothing on stdout, no output file -----------------------

Setup = Callable[[], None]


def _table(path="t.parquet", n=40, **override) -> Setup:
    def setup() -> None:
        y, s = make_data(n)
        cols = {
            "score": pa.array(s.tolist(), pa.float64()),
            "label": pa.array(y.tolist(), pa.int64()),
        }
        for name, (row, value) in override.items():
            base = cols.get(name, pa.array(list(range(n)), pa.int64()))
            values = base.to_pylist()
            if row is not None:
                values[row - 1] = value
            cols[name] = pa.array(values, base.type)
        write_parquet(path, **cols)

    return setup


def _drop(column: str) -> Setup:
    def setup() -> None:
        y, s = make_data(40)
        cols = {"score": s, "label": y}
        del cols[column]
        write_parquet("t.parquet", **cols, other=np.zeros(40))

    return setup


def _text(path: str, text: str) -> Setup:
    return lambda: Path(path).write_text(text)


def _nothing() -> None:
    pass


BAD_INPUTS = {
    "missing file": (_nothing, ["nope.parquet"], ["cannot read 'nope.parquet': no such file"]),
    "directory": (lambda: Path("sub").mkdir(), ["sub"], ["cannot read 'sub'", "is a directory"]),
    "not parquet": (
        _text("fake.parquet", "score,label\n0.1,0\n0.9,1\n"),
        ["fake.parquet"],
        ["cannot read 'fake.parquet' as Parquet"],
    ),
    "missing score column": (
        _drop("score"),
        ["t.parquet"],
        ["'t.parquet' has no column 'score' (it has: label, other)", "--score-col"],
    ),
    "missing label column": (
        _drop("label"),
        ["t.parquet"],
        ["'t.parquet' has no column 'label' (it has: score, other)", "--label-col"],
    ),
    "missing client column": (
        _table(),
        ["t.parquet", "--client-col", "site"],
        ["'t.parquet' has no column 'site'", "--client-col"],
    ),
    "null score": (
        _table(score=(5, None)),
        ["t.parquet"],
        ["'t.parquet', column 'score', row 5: score is missing."],
    ),
    "nan score": (
        _table(score=(6, math.nan)),
        ["t.parquet"],
        ["'t.parquet', column 'score', row 6: score is NaN."],
    ),
    "score out of range": (
        _table(score=(3, 1.5)),
        ["t.parquet"],
        ["'t.parquet', column 'score', row 3: score", "1.5", "outside the score range [0, 1]"],
    ),
    "score out of given range": (
        _table(score=(4, 2.5)),
        ["t.parquet", "--score-range", "-2,2"],
        ["'t.parquet', column 'score', row 4:", "2.5", "outside the score range [-2, 2]"],
    ),
    "string scores": (
        lambda: write_parquet("t.parquet", score=["0.1", "0.9"], label=[0, 1]),
        ["t.parquet"],
        ["'t.parquet', column 'score': scores must be numbers"],
    ),
    "label 2": (
        _table(label=(7, 2)),
        ["t.parquet"],
        ["'t.parquet', column 'label', row 7: label", "is not binary"],
    ),
    "null label": (
        _table(label=(8, None)),
        ["t.parquet"],
        ["'t.parquet', column 'label', row 8: label is missing."],
    ),
    "string labels without pos-label": (
        lambda: write_parquet("t.parquet", score=[0.1, 0.9], label=["no", "yes"]),
        ["t.parquet"],
        ["'t.parquet', column 'label': labels must be 0/1 or true/false", "--pos-label"],
    ),
    "three labels with pos-label": (
        lambda: write_parquet("t.parquet", score=[0.1, 0.5, 0.9], label=["no", "yes", "eh"]),
        ["t.parquet", "--pos-label", "yes"],
        ["'t.parquet', column 'label', row 3: label 'eh' is a third value"],
    ),
    "null client": (
        _table(client=(9, None)),
        ["t.parquet"],
        ["'t.parquet', column 'client', row 9: client id is missing."],
    ),
    "one class": (
        lambda: write_parquet("t.parquet", score=[0.1, 0.5, 0.9], label=[0, 0, 0]),
        ["t.parquet"],
        ["'t.parquet', column 'label': the labels hold no positive example"],
    ),
    "empty parquet": (
        lambda: write_parquet(
            "t.parquet", score=pa.array([], pa.float64()), label=pa.array([], pa.int64())
        ),
        ["t.parquet"],
        ["'t.parquet' has no rows"],
    ),
    "empty csv": (_text("e.csv", ""), ["e.csv"], ["'e.csv' is empty"]),
    "header-only csv": (_text("h.csv", "score,label\n"), ["h.csv"], ["'h.csv' has no rows"]),
    "non-numeric csv score": (
        _text("n.csv", "score,label\n0.1,0\n0.9,1\n0.4,0\nhigh,1\n"),
        ["n.csv"],
        ["'n.csv', column 'score', row 4: score 'high' is not a number."],
    ),
    "csv row excludes header": (
        _text("r.csv", "score,label\n0.1,0\n0.9,1\n0.4,3\n"),
        ["r.csv"],
        ["'r.csv', column 'label', row 3:", "is not binary"],
    ),
    "bad score range": (_table(), ["t.parquet", "--score-range", "1,0"], ["--score-range"]),
    "bad thresholds": (
        _table(),
        ["t.parquet", "--thresholds", "0.3,abc"],
        ["--thresholds takes numbers separated by commas", "'0.3,abc'"],
    ),
    "threshold outside range": (
        _table(),
        ["t.parquet", "--thresholds", "1.5"],
        ["thresholds must lie in the score range [0, 1]"],
    ),
    "bad height": (_table(), ["t.parquet", "--height", "tall"], ["--height must be an integer"]),
    "bad buckets": (
        _table(),
        ["t.parquet", "--buckets", "0"],
        ["--buckets must be from 1 to"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input(workdir, case):
    setup, args, expected = BAD_INPUTS[case]
    setup()
    result = invoke("evaluate", *args, "--format", "json", "--seed", "1", "-o", "report.json")
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    # under --format json the error is also a JSON document on stdout, and nothing else is
    error = json.loads(result.stdout)["error"]
    assert error["message"] in " ".join(result.stderr.split())
    msg = flat(result.stderr)
    assert msg.startswith("fedeval: error: ")
    assert msg.count("error:") == 1
    assert "Traceback" not in msg
    for part in expected:
        assert part in msg, (part, msg)
    assert not (workdir / "report.json").exists()
    assert list(workdir.glob(".report.json.*")) == []


def test_bad_csv_on_stdin_names_stdin_and_row(workdir):
    result = invoke("evaluate", "-", "-o", "report.json", input="score,label\n0.2,0\n-3,1\n0.5,1\n")
    assert result.exit_code == 2
    assert result.stdout == ""
    msg = flat(result.stderr)
    assert msg.startswith("fedeval: error: '<stdin>', column 'score', row 2: score")
    assert "-3" in msg
    assert not Path("report.json").exists()


def test_failed_run_keeps_an_existing_output_file(workdir):
    _table(score=(2, None))()
    Path("report.json").write_text("previous\n")
    result = invoke("evaluate", "t.parquet", "-o", "report.json")
    assert result.exit_code == 2
    assert Path("report.json").read_text() == "previous\n"
    assert list(workdir.glob(".report.json.*")) == []


# --- regressions of bugs found and fixed ---


@pytest.mark.parametrize("column", ["[/x]", "[bold]x"])
def test_error_text_is_not_read_as_markup(scores, column):
    result = invoke("evaluate", scores, "--score-col", column)
    assert result.exit_code == 2
    assert f"has no column '{column}'" in flat(result.stderr)


def test_output_path_that_is_a_directory(scores):
    Path("outdir").mkdir()
    result = invoke("evaluate", scores, "--seed", "1", "-o", "outdir")
    assert result.exit_code == 2
    assert flat(result.stderr).startswith("fedeval: error:")


def test_error_message_is_one_line(scores):
    # a message longer than any terminal, so the outcome does not depend on where pytest runs
    column = "c" * 400
    result = invoke("evaluate", scores, "--score-col", column)
    assert result.exit_code == 2
    assert f"has no column '{column}'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_evaluate_help_shows_documented_defaults():
    text = flat(invoke("evaluate", "--help", env=WIDE).stdout)
    assert "1 for distdp, 5 for localdp" in text


# --- curves, calibrate, apply --------------------------------------------------------------------


@pytest.fixture
def bigger(workdir) -> str:
    y, s = make_data(5000, seed=3)
    write_parquet("big.parquet", score=s, label=y, id=np.arange(5000))
    return "big.parquet"


def test_evaluate_reports_curve_areas(bigger):
    doc = run_json(bigger, "--seed", "1", "--quantiles", "50")
    c = doc["metrics"]["curves"]
    assert c["quantiles"] == 50
    for key in ("roc_auc", "average_precision"):
        assert set(c[key]) == {"estimate", "ci95", "exact", "abs_error"}
    assert 0 <= c["roc_area_error"] < 0.05 and 0 <= c["pr_area_error"] < 0.1


def test_curves_json_csv_and_table(bigger):
    r = invoke("curves", bigger, "--model", "federated", "-q", "32", "--format", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "fedeval.curves/2"
    pts = doc["curves"]["points"]
    assert pts["threshold"][0] is None and pts["threshold"][-1] is None  # the two ends
    assert (pts["fpr"][0], pts["tpr"][0]) == (0.0, 0.0)
    assert (pts["fpr"][-1], pts["tpr"][-1]) == (1.0, 1.0)
    assert doc["privacy"]["height"] == 7  # ⌈log₂ 32⌉ + 2

    r = invoke("curves", bigger, "--model", "federated", "-q", "32", "--format", "csv")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "threshold,fpr,tpr,precision"
    assert len(lines) - 1 == len(pts["tpr"])  # the same points as the JSON
    assert [float(x) for x in lines[5].split(",")[1:]] == [
        pts["fpr"][4],
        pts["tpr"][4],
        pts["precision"][4],
    ]
    assert "ROC AUC" in flat(invoke("curves", bigger, "--seed", "2", env=WIDE).stdout)


def test_curves_output_format_from_the_extension(bigger):
    r = invoke("curves", bigger, "-o", "c.json", "--seed", "1")
    assert r.exit_code == 0 and r.stdout == ""
    assert json.loads(Path("c.json").read_text())["schema"].startswith("fedeval.curves/")
    r = invoke("curves", bigger, "--format", "csv", "-o", "c.csv", "--seed", "1")
    assert r.exit_code == 0 and r.stdout == ""
    assert Path("c.csv").read_text().startswith("threshold,fpr,tpr,precision")


def test_plot_suffix_refused_before_work(bigger):
    r = invoke("curves", bigger, "--plot", "c.pdf")
    assert r.exit_code == 2
    assert "use a .png or .svg" in flat(r.stderr)
    assert not Path("c.pdf").exists()


def test_calibrate_writes_a_map_and_apply_pipes(bigger):
    r = invoke("calibrate", bigger, "--seed", "1", "-o", "m.json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(Path("m.json").read_text())
    assert doc["schema"] == "fedeval.calibration-map/2"
    assert doc["privacy"]["model"] == "distdp" and doc["privacy"]["epsilon"] == 1.0
    assert doc["ece"]["bins"] == 15 and doc["ece"]["calibrated"]["in_sample"] is True
    assert len(doc["edges"]) == len(doc["values"]) + 1
    assert all(a <= b for a, b in zip(doc["values"], doc["values"][1:], strict=False))

    # CSV through stdin and stdout: every input column kept, plus the calibrated one.
    csv_in = "score,label,who\n0.05,0,a\n0.5,1,b\n0.97,1,c\n"
    r = invoke("apply", "m.json", "-", input=csv_in)
    assert r.exit_code == 0, r.stderr
    out = [line.replace('"', "").split(",") for line in r.stdout.strip().splitlines()]
    assert out[0] == ["score", "label", "who", "calibrated"]
    assert [row[:3] for row in out[1:]] == [
        ["0.05", "0", "a"],
        ["0.5", "1", "b"],
        ["0.97", "1", "c"],
    ]
    got = [float(row[3]) for row in out[1:]]
    cmap = fedeval.documents.map_file.load_map("m.json")
    np.testing.assert_allclose(got, cmap(np.array([0.05, 0.5, 0.97])))

    # Parquet in, Parquet out.
    r = invoke("apply", "m.json", bigger, "-o", "out.parquet")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table("out.parquet")
    assert t.column_names == ["score", "label", "id", "calibrated"]
    np.testing.assert_allclose(
        t["calibrated"].to_numpy(), cmap(t["score"].to_numpy().astype(float))
    )


def test_calibrate_json_and_bbq(bigger):
    r = invoke("calibrate", bigger, "--method", "bbq", "--format", "json", "--seed", "1")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["method"] == "bbq"
    r = invoke("calibrate", bigger, "--method", "bbq", "--buckets", "10")
    assert r.exit_code == 2 and "does not apply to bbq" in flat(r.stderr)
    r = invoke("calibrate", bigger, "--method", "platt")
    assert r.exit_code == 2 and "unknown method" in flat(r.stderr)


def test_apply_refuses_a_report_and_leaves_no_output(bigger):
    assert invoke("evaluate", bigger, "--seed", "1", "-o", "report.json").exit_code == 0
    r = invoke("apply", "report.json", bigger, "-o", "out.csv")
    assert r.exit_code == 2
    assert "is a 'fedeval.report/2' document, not a calibration map" in flat(r.stderr)
    assert not Path("out.csv").exists()
    invoke("calibrate", bigger, "--seed", "1", "-o", "m.json")
    write_parquet("bad.parquet", score=[0.2, 1.5], label=[0, 1])
    r = invoke("apply", "m.json", "bad.parquet", "-o", "out.csv")
    assert r.exit_code == 2
    assert "'bad.parquet', column 'score', row 2: score 1.5 is outside" in flat(r.stderr)
    assert not Path("out.csv").exists()
    assert not list(Path(".").glob(".out.csv*"))


def test_every_command_has_help():
    for cmd in ("evaluate", "curves", "calibrate", "apply"):
        r = invoke(cmd, "--help", env=WIDE)
        assert r.exit_code == 0, cmd
        assert "Exit codes" in flat(r.stdout), cmd


def test_plots_from_every_command(bigger):
    png = b"\x89PNG\r\n\x1a\n"
    r = invoke("evaluate", bigger, "--seed", "1", "--plot", "figs/")  # a directory: final /
    assert r.exit_code == 0, r.stderr
    assert Path("figs/curves.png").read_bytes().startswith(png)
    r = invoke("evaluate", bigger, "--seed", "1", "--plot", "e.svg")  # or a file
    assert r.exit_code == 0, r.stderr
    assert "<svg" in Path("e.svg").read_text()
    r = invoke("curves", bigger, "--seed", "1", "--plot", "c.svg")
    assert r.exit_code == 0, r.stderr
    assert "<svg" in Path("c.svg").read_text()
    r = invoke("calibrate", bigger, "--seed", "1", "--plot", "rel.png")
    assert r.exit_code == 0, r.stderr
    assert Path("rel.png").read_bytes().startswith(png)


def test_apply_csv_to_parquet_is_typed_and_csv_header_unquoted(bigger):
    assert invoke("calibrate", bigger, "--seed", "1", "-o", "m.json").exit_code == 0
    Path("in.csv").write_text("score,label,who\n0.05,0,a\n0.5,1,b\n0.97,1,c\n")
    r = invoke("apply", "m.json", "in.csv", "-o", "out.parquet")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table("out.parquet")
    assert pa.types.is_floating(t.schema.field("score").type)
    assert pa.types.is_integer(t.schema.field("label").type)
    # ... so the output can be evaluated directly.
    assert invoke("evaluate", "out.parquet", "-m", "federated", "--seed", "1").exit_code == 0
    r = invoke("apply", "m.json", "in.csv")
    assert r.stdout.splitlines()[0] == "score,label,who,calibrated"


def test_a_release_without_positives_is_answered_from_the_release(workdir):
    """A DP release whose noisy positive total is ≤ 0 (here: data without positives, so the
    chance is high; seeded, reproducible) is answered by `--from` as the one-shot answers it:
    each metric that divides by the total is undetermined, 0.5 over [0, 1] with the reason."""
    write_parquet("none.parquet", score=np.linspace(0.05, 0.95, 10), label=np.zeros(10, np.int64))
    for seed in range(1, 6):
        saved = invoke(
            "evaluate", "none.parquet", "-m", "distdp", "--no-exact", "--seed", str(seed),
            "--save-release", f"r{seed}.fedeval", "-f", "json",
        )  # fmt: skip
        assert saved.exit_code == 0, saved.stderr
        out = invoke("evaluate", "--from", f"r{seed}.fedeval", "-f", "json")
        assert out.exit_code == 0, out.stderr
        auc = json.loads(out.stdout)["metrics"]["auc"]
        if auc.get("note"):  # the release's positives at or below 0
            assert auc["estimate"] == 0.5 and auc["ci95"] == [0.0, 1.0]
            assert "positives" in auc["note"]
            return
    pytest.fail("no seed gave a release with a positive total at or below 0")
