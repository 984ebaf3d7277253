"""Partitioning a table over simulated clients: every scheme deals each row to exactly one client,
seeded; the Dirichlet label skew (seed paper 004, appendix A.2) and Zipf sizes have the shape
theory predicts; the federated release is blind to the partition; `fedeval partition` round trips.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.api.evaluate import evaluate
from fedeval.cli import app
from fedeval.core.errors import UsageError
from fedeval.protocol.partition import Scheme, assign_clients, summarise
from fedeval.tables.scored import scored_from_arrays

ASSIGNED = [Scheme.IID, Scheme.DIRICHLET, Scheme.SIZES]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
runner = CliRunner()


def flat(text: str) -> str:
    return " ".join(ANSI.sub("", text).split())


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input)


def labels(n: int, p: float = 0.3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(n) < p


def data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 3 == 0).astype(np.int64)
    s = np.clip(0.3 * y + 0.7 * rng.random(n), 0.0, 1.0)
    return y, s


def assign(y, k, scheme, seed=0, **kw) -> np.ndarray:
    return assign_clients(y, k, scheme, np.random.default_rng(seed), **kw)


# --- assignment ----------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ASSIGNED)
def test_every_row_gets_one_client_in_range(scheme):
    y = labels(1000)
    c = assign(y, 17, scheme)
    assert c.dtype == np.int64 and c.shape == y.shape
    assert c.min() >= 0 and c.max() < 17
    # each class's rows are all dealt out: per-class client counts add up to the class size
    assert np.bincount(c[y], minlength=17).sum() == y.sum()


@pytest.mark.parametrize("scheme", ASSIGNED)
def test_seeded_and_reproducible(scheme):
    y = labels(500)
    assert np.array_equal(assign(y, 10, scheme, seed=3), assign(y, 10, scheme, seed=3))
    assert not np.array_equal(assign(y, 10, scheme, seed=3), assign(y, 10, scheme, seed=4))


def test_iid_sizes_differ_by_at_most_one_and_no_client_is_empty():
    y = labels(1003)
    sizes = np.bincount(assign(y, 10, Scheme.IID), minlength=10)
    assert sizes.max() - sizes.min() <= 1 and sizes.min() > 0
    # one client per row, when there are as many clients as rows
    assert sorted(assign(y[:50], 50, Scheme.IID)) == list(range(50))


def test_iid_is_not_sorted_by_row_or_label():
    y = np.repeat([False, True], 500)
    s = summarise(assign(y, 10, Scheme.IID), y, n_clients=10)
    assert s.single_class_share == 0 and s.label_skew < 0.1


def expected_skew(p: float, k: int, n: int, beta: float = math.inf) -> float:
    """E|client positive share − p| for equal-sized clients, to first order.

    Client k holds n_j·p_{j,k} rows of class j with p_j ~ Dirichlet(β·1_K): K·p_{j,k} has mean 1
    and variance (K−1)/(Kβ+1), so its share deviates by p(1−p)(δ₁ − δ₀), variance
    2 p²(1−p)² (K−1)/(Kβ+1); sampling adds p(1−p)·K/n. The mean |·| of a normal is √(2/π)·sd.
    """
    var = 2 * (p * (1 - p)) ** 2 * (k - 1) / (k * beta + 1) + p * (1 - p) * k / n
    return math.sqrt(2 / math.pi * var)


SEEDS = range(5)
N, K, P = 20_000, 20, 0.3


def mean_skew(scheme, **kw) -> float:
    y = labels(N, P)
    return float(np.mean([summarise(assign(y, K, scheme, s, **kw), y).label_skew for s in SEEDS]))


def test_iid_label_skew_is_sampling_noise_only():
    assert 0.8 < mean_skew(Scheme.IID) / expected_skew(P, K, N) < 1.2


def test_dirichlet_large_beta_skew_matches_its_variance():
    # β = 100: skew ≈ 2.2 × the iid skew, as the Dirichlet variance predicts
    ratio = mean_skew(Scheme.DIRICHLET, beta=100) / expected_skew(P, K, N, beta=100)
    assert 0.8 < ratio < 1.2


def test_dirichlet_small_beta_gives_strong_label_skew():
    y = labels(N, P)
    iid = expected_skew(P, K, N)
    for seed in SEEDS:
        s = summarise(assign(y, K, Scheme.DIRICHLET, seed, beta=0.1), y, n_clients=K)
        assert s.label_skew > 15 * iid
        assert s.label_skew_normalised > 0.6  # 1 would be every client holding one class
    # the seed paper's Table 8 measure: clients lacking classes
    single = [
        summarise(assign(y, K, Scheme.DIRICHLET, seed, beta=0.1), y).single_class_share
        for seed in SEEDS
    ]
    assert np.mean(single) > 0.3


def test_dirichlet_skew_falls_as_beta_grows():
    skews = [mean_skew(Scheme.DIRICHLET, beta=b) for b in (0.1, 1.0, 10.0, 100.0)]
    assert skews == sorted(skews, reverse=True)


def test_dirichlet_many_clients_leaves_some_empty():
    y = labels(2000)
    s = summarise(assign(y, 500, Scheme.DIRICHLET, beta=0.1), y, n_clients=500)
    assert s.empty_clients > 0 and s.clients + s.empty_clients == 500


def test_sizes_are_zipf_skewed_and_labels_are_not():
    y = labels(N, P)
    c = assign(y, K, Scheme.SIZES, zipf=1.2)
    s = summarise(c, y, n_clients=K)
    # ranks 10 and 11 of 20 hold the median: max / median ≈ 1 / mean(10^-1.2, 11^-1.2) ≈ 16.8
    assert 13 < s.max_size / s.median_size < 21
    assert s.label_skew < 2 * expected_skew(P, K, N)
    flatter = summarise(assign(y, K, Scheme.SIZES, zipf=0.3), y, n_clients=K)
    assert flatter.max_size / flatter.median_size < s.max_size / s.median_size


def test_summarise_by_hand():
    client = np.array([0, 0, 1, 1, 1, 3])
    y = np.array([1, 0, 1, 1, 1, 0], dtype=bool)
    s = summarise(client, y, n_clients=5)
    assert (s.rows, s.clients, s.empty_clients) == (6, 3, 2)
    assert (s.min_size, s.median_size, s.max_size) == (1, 2.0, 3)
    assert s.positive_share == pytest.approx(4 / 6)
    # shares 1/2, 1, 0 against 2/3, weighted by sizes 2, 3, 1
    assert s.label_skew == pytest.approx((2 / 6 + 3 / 3 + 2 / 3) / 6)
    assert s.single_class_share == pytest.approx(2 / 3)
    assert s.label_skew_max == pytest.approx(2 * (4 / 6) * (2 / 6))
    # any ids: distinct ids are the clients, none empty
    named = summarise(np.array(["a", "a", "b", "b", "b", "d"]), y)
    assert (named.clients, named.empty_clients, named.label_skew) == (3, 0, s.label_skew)


@pytest.mark.parametrize(
    ("args", "kw", "message"),
    [
        ((10, Scheme.IID), {}, None),
        ((0, Scheme.IID), {}, "`clients` must be at least 1"),
        ((2.5, Scheme.IID), {}, "`clients` must be a whole number"),
        ((20, Scheme.IID), {}, "at most 10 `clients`"),
        ((11, Scheme.DIRICHLET), {}, "at most 10 `clients`"),
        ((10**9, Scheme.SIZES), {}, "at most 10 `clients`"),
        ((3, Scheme.DIRICHLET), {"beta": 0.0}, "`beta`"),
        ((3, Scheme.DIRICHLET), {"beta": math.inf}, "`beta`"),
        ((3, Scheme.SIZES), {"zipf": -1.0}, "`zipf`"),
        ((3, Scheme.COLUMN), {}, "nothing to assign"),
        ((3, "round-robin"), {}, "`scheme` takes one of iid, dirichlet, sizes, column"),
    ],
)
def test_assign_validation(args, kw, message):
    y = labels(10)
    if message is None:
        assign(y, *args, **kw)
        return
    with pytest.raises(UsageError, match=re.escape(message)):
        assign(y, *args, **kw)


# --- the histogram is blind to the partition ------------------------------------------------------


def partitions(y) -> dict[str, np.ndarray | None]:
    out: dict[str, np.ndarray | None] = {"one per client": None}
    for scheme in ASSIGNED:
        out[scheme.value] = assign(y, 12, scheme, beta=0.1)
    return out


def test_leaf_counts_identical_for_every_partition():
    y, s = data()
    counts = {
        name: scored_from_arrays(y, s, client_ids=c).leaf_counts(10)
        for name, c in partitions(y).items()
    }
    first = counts.pop("one per client")
    assert all(np.array_equal(first, c) for c in counts.values())


def test_federated_metrics_identical_for_every_partition():
    y, s = data()
    found = {}
    for name, c in partitions(y).items():
        ev = evaluate(y, s, model="federated", client_ids=c, seed=0, ci_draws=0)
        found[name] = (
            ev.auc.estimate,
            [(t.precision.estimate, t.recall.estimate, t.accuracy.estimate) for t in ev.thresholds],
            ev.clients,
        )
    base_metrics = found["one per client"][:2]
    for name, (auc, pra, _) in found.items():
        assert (auc, pra) == base_metrics, name  # exact equality
    assert found["one per client"][2] == len(y)
    assert found["iid"][2] == 12


# --- the command ----------------------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def scores(workdir) -> str:
    y, s = data()
    ids = [f"r{i:04d}" for i in range(len(y))]
    pq.write_table(pa.table({"id": ids, "score": s, "label": y}), "scores.parquet")
    return "scores.parquet"


def metrics(path: str) -> dict:
    result = invoke(
        "evaluate", path, "-m", "federated", "--ci-draws", "0", "--seed", "0", "-f", "json"
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def strip_clients(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    for key in ("source", "clients"):
        doc["data"].pop(key)
    doc["privacy"].pop("note", None)
    doc.pop("fedeval_version")
    doc.pop("integrity")  # the seal covers the fields removed above
    return doc


@pytest.mark.parametrize(
    ("scheme", "extra"),
    [("iid", []), ("dirichlet", ["--beta", "0.1"]), ("sizes", ["--zipf", "2"])],
)
def test_staged_equals_one_shot_for_every_scheme(scores, scheme, extra):
    result = invoke("partition", scores, "-k", "40", "--scheme", scheme, *extra, "-o", "c.parquet")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    out = pq.read_table("c.parquet")
    original = pq.read_table(scores)
    assert out.column_names == [*original.column_names, "client"]
    assert out.drop_columns(["client"]).equals(original)
    client = out.column("client").to_numpy()
    assert client.min() >= 0 and client.max() < 40
    nonempty = len(np.unique(client))

    staged, one_shot = metrics("c.parquet"), metrics(scores)
    assert staged["data"]["clients"] == nonempty
    assert strip_clients(staged) == strip_clients(one_shot)  # identical counts and metrics
    msg = flat(result.stderr)
    assert f"{nonempty} with examples" in msg
    assert scheme in msg and "seed" in msg and "label skew" in msg
    if nonempty < 40:
        assert f"{40 - nonempty} empty" in msg


def test_same_seed_same_file_and_seed_reported(scores):
    for out in ("a.parquet", "b.parquet"):
        result = invoke("partition", scores, "-k", "7", "--scheme", "iid", "--seed", "5", "-o", out)
        assert result.exit_code == 0, result.stderr
        assert "seed 5" in flat(result.stderr)
    assert pq.read_table("a.parquet").equals(pq.read_table("b.parquet"))
    result = invoke("partition", scores, "-k", "7", "--scheme", "iid", "-o", "c.parquet")
    assert re.search(r"seed \d+", flat(result.stderr))


def test_csv_cells_pass_through_byte_for_byte(workdir):
    rows = ["007,0.10,0", "008,0.9000,1", "009,1e-1,0", "010,0.5,1"]
    Path("s.csv").write_text("id,score,label\n" + "\n".join(rows) + "\n")
    result = invoke("partition", "s.csv", "-k", "2", "--scheme", "iid", "-o", "c.csv")
    assert result.exit_code == 0, result.stderr
    lines = Path("c.csv").read_text().splitlines()
    assert [line.replace('"', "") for line in lines[:1]] == ["id,score,label,client"]
    assert [line.rsplit(",", 1)[0] for line in lines[1:]] == rows
    assert sorted(int(line.rsplit(",", 1)[1]) for line in lines[1:]) == [0, 0, 1, 1]


def test_csv_to_parquet_types_columns_so_evaluate_reads_it(workdir):
    y, s = data(60)
    text = "score,label\n" + "".join(f"{a:.17g},{b}\n" for a, b in zip(s, y, strict=True))
    Path("s.csv").write_text(text)
    result = invoke("partition", "s.csv", "-k", "6", "--scheme", "iid", "-o", "c.parquet")
    assert result.exit_code == 0, result.stderr
    assert pa.types.is_floating(pq.read_table("c.parquet").schema.field("score").type)
    assert metrics("c.parquet")["data"]["clients"] == 6


def test_stdin_to_stdout(workdir):
    text = "score,label\n0.1,0\n0.9,1\n0.4,0\n0.8,1\n"
    result = invoke("partition", "-", "-k", "2", "--scheme", "iid", "--seed", "1", input=text)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 5 and lines[0].replace('"', "") == "score,label,client"
    assert "<stdin>: 4 examples over 2 clients" in flat(result.stderr)


def test_column_scheme_keeps_and_summarises_the_ids(workdir):
    y, s = data(30)
    site = np.array(["a", "b", "c"])[np.arange(30) % 3]
    pq.write_table(pa.table({"score": s, "label": y, "site": site}), "t.parquet")
    result = invoke(
        "partition", "t.parquet", "--scheme", "column", "--client-col", "site", "-o", "c.parquet"
    )
    assert result.exit_code == 0, result.stderr
    assert pq.read_table("c.parquet").equals(pq.read_table("t.parquet"))
    msg = flat(result.stderr)
    assert "over 3 clients (column)" in msg and "seed" not in msg
    # rows 0, 3, 6 … (the positives) are all at site a
    assert "100% of clients hold one class only" in msg


def test_pos_label_for_text_labels(workdir):
    Path("s.csv").write_text("score,label\n0.1,no\n0.9,yes\n0.4,no\n0.8,yes\n")
    result = invoke("partition", "s.csv", "-k", "2", "--scheme", "iid", "--pos-label", "yes")
    assert result.exit_code == 0, result.stderr
    assert "50.0% overall" in flat(result.stderr)


def test_help_lists_options_and_exit_codes():
    result = runner.invoke(app, ["partition", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = flat(result.stdout)
    for option in ("--clients", "--scheme", "--beta", "--zipf", "--seed", "--output"):
        assert option in text, option
    for scheme in Scheme:
        assert scheme.value in text
    assert "Exit codes: 0 ok · 2 bad input or usage" in text


def _with_client(workdir) -> None:
    y, s = data(20)
    pq.write_table(pa.table({"score": s, "label": y, "client": np.arange(20)}), "t.parquet")


def _plain(workdir, **override) -> None:
    y, s = data(20)
    cols = {"score": s, "label": y} | override
    pq.write_table(pa.table(cols), "t.parquet")


BAD = {
    # click: "0 is not in the range x>=1"; typer >= 0.22's own: "greater than or equal to 1"
    "no clients": (_plain, ["-k", "0", "--scheme", "iid"], ["--clients", "1"]),
    "clients missing": (_plain, ["--scheme", "dirichlet"], ["needs the number of clients"]),
    "beta zero": (_plain, ["-k", "3", "--scheme", "dirichlet", "--beta", "0"], ["--beta", "> 0"]),
    "beta negative": (
        _plain,
        ["-k", "3", "--scheme", "dirichlet", "--beta", "-1"],
        ["--beta", "> 0", "-1"],
    ),
    "beta nan": (_plain, ["-k", "3", "--scheme", "dirichlet", "--beta", "nan"], ["--beta"]),
    "zipf zero": (_plain, ["-k", "3", "--scheme", "sizes", "--zipf", "0"], ["--zipf", "> 0"]),
    "beta with iid": (
        _plain,
        ["-k", "3", "--scheme", "iid", "--beta", "1"],
        ["--beta", "--scheme dirichlet only"],
    ),
    "zipf with dirichlet": (
        _plain,
        ["-k", "3", "--scheme", "dirichlet", "--zipf", "1"],
        ["--zipf", "--scheme sizes only"],
    ),
    "unknown scheme": (_plain, ["-k", "3", "--scheme", "zipf"], ["--scheme takes one of"]),
    "iid more clients than rows": (
        _plain,
        ["-k", "21", "--scheme", "iid"],
        ["20 rows for 21 clients", "at most 20"],
    ),
    "missing label column": (
        lambda w: pq.write_table(pa.table({"score": [0.1], "y": [1]}), "t.parquet"),
        ["-k", "1", "--scheme", "iid"],
        ["'t.parquet' has no column 'label' (it has: score, y)", "--label-col"],
    ),
    "label not binary": (
        lambda w: _plain(w, label=np.arange(20) % 3),
        ["-k", "2", "--scheme", "iid"],
        ["'t.parquet', column 'label', row 3: label 2 is not binary"],
    ),
    "existing client column": (
        _with_client,
        ["-k", "2", "--scheme", "dirichlet"],
        ["already has a column 'client'", "--scheme column", "--client-col"],
    ),
    "column without the column": (
        _plain,
        ["--scheme", "column"],
        ["'t.parquet' has no column 'client'", "--client-col"],
    ),
    "clients with column": (_with_client, ["-k", "3", "--scheme", "column"], ["drop --clients"]),
    "client ids in lists": (  # the full fuzz's one exit 70: Arrow cannot dictionary-encode lists
        lambda w: _plain(w, client=pa.array([[0.5]] * 20)),
        ["--scheme", "column"],
        ["'t.parquet', column 'client': client ids must be numbers or text, found type list"],
    ),
    "missing client id": (
        lambda w: _plain(w, client=pa.array([1] * 4 + [None] + [2] * 15)),
        ["--scheme", "column"],
        ["'t.parquet', column 'client', row 5: client id is missing."],
    ),
    "missing file": (lambda w: None, ["-k", "2", "--scheme", "iid"], ["no such file"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exits_2_and_writes_nothing(workdir, case):
    setup, args, expected = BAD[case]
    setup(workdir)
    result = invoke("partition", "t.parquet", *args, "-o", "out.parquet")
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert result.stdout == ""
    msg = flat(result.stderr)
    assert "Traceback" not in msg
    for part in expected:
        assert part in msg, (part, msg)
    assert sorted(p.name for p in workdir.iterdir()) == (
        [] if case == "missing file" else ["t.parquet"]
    )


def test_weights_that_pass_one_by_rounding_are_still_drawn_multinomially():
    # numpy's multinomial refuses partial sums above 1 + 1e-12 (a Dirichlet draw over many
    # clients can round there); the inverse-CDF fallback draws the same distribution.
    from fedeval.protocol.partition import _multinomial

    p = np.array([0.6, 0.4 + 1e-11, 0.0])
    with pytest.raises(ValueError):
        np.random.default_rng(0).multinomial(10, p)
    n = 100_000
    counts = _multinomial(np.random.default_rng(0), n, p)
    assert counts.sum() == n and counts[2] == 0
    assert abs(counts[0] / n - 0.6) < 5 * np.sqrt(0.6 * 0.4 / n)  # 5 sd
