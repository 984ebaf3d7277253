"""Hypothesis strategies for malformed input: CSV and Parquet tables, JSON documents, option
values. Each mostly stays close to valid input (so the case gets past the first check and
reaches the deeper ones) and is sometimes far from it."""

from __future__ import annotations

import gzip
import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

TOKENS = [
    "",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e400",
    "-1e400",
    "-0",
    "0x10",
    "true",
    "False",
    "[1]",
    '"',
    '""',
    "\\",
    "é",
    "\x00",
    "1" * 400,
    "-1",
    "2",
    " ",
    "None",
    "null",
    "{}",
    "0.5",
    "1e-320",
    "99999999999999999999999",
    "0,5",
    "１",
    "\u202e",
    "\r",
]

COLUMN_NAMES = ["score", "label", "client", "Score", "", "score ", "x", "label\x00", "é", "1"]


# --- bytes -------------------------------------------------------------------------------------


@st.composite
def corrupt(draw, data: bytes) -> bytes:
    """`data`, often intact; else truncated, bytes overwritten, or bytes inserted."""
    op = draw(st.sampled_from(["keep", "keep", "truncate", "flip", "insert"]))
    if op == "keep" or not data:
        return data
    buf = bytearray(data)
    if op == "truncate":
        del buf[draw(st.integers(0, len(buf) - 1)) :]
    elif op == "flip":
        for _ in range(draw(st.integers(1, 6))):
            buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
    else:
        i = draw(st.integers(0, len(buf)))
        buf[i:i] = draw(st.binary(min_size=1, max_size=40))
    return bytes(buf)


# --- tables ------------------------------------------------------------------------------------

good_score = st.floats(0, 1).map(lambda x: f"{x:.4f}")
bad_cell = st.one_of(
    st.sampled_from(TOKENS),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.text(max_size=6),
)


@st.composite
def csv_table(draw) -> tuple[str, bytes]:
    """(file name, bytes) of a binary scored table in CSV: header and cells mostly valid."""
    header = ["score", "label"]
    if draw(st.booleans()):
        header.append("client")
    if draw(st.integers(0, 4)) == 0:
        header = draw(st.lists(st.sampled_from(COLUMN_NAMES), min_size=0, max_size=5))
    n = draw(st.integers(0, 24))
    rows = []
    for i in range(n):
        cells = []
        for name in header:
            if draw(st.integers(0, 9)) == 0:
                cells.append(draw(bad_cell))
            elif name == "label":
                cells.append(str(i % 2))
            elif name == "client":
                cells.append(str(i % 5))
            else:
                cells.append(draw(good_score))
        if draw(st.integers(0, 15)) == 0:
            cells = cells[: draw(st.integers(0, len(cells)))] + draw(st.lists(bad_cell, max_size=2))
        rows.append(cells)
    sep = draw(st.sampled_from([",", ",", ",", ";", "\t"]))
    eol = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    text = eol.join(sep.join(r) for r in [header, *rows]) + draw(st.sampled_from([eol, ""]))
    if draw(st.integers(0, 9)) == 0:
        text = "\ufeff" + text
    data = draw(corrupt(text.encode("utf-8", "surrogatepass")))
    kind = draw(st.sampled_from(["csv", "csv", "csv", "gz", "fake-gz"]))
    if kind == "gz":
        return "t.csv.gz", draw(corrupt(gzip.compress(data, mtime=0)))
    if kind == "fake-gz":
        return "t.csv.gz", data
    return draw(st.sampled_from(["t.csv", "t.txt", "t"])), data


def _column(draw, name: str, n: int) -> pa.Array:
    kind = draw(
        st.sampled_from(
            [
                "good",
                "good",
                "good",
                "float32",
                "float16",
                "int",
                "bool",
                "string",
                "null",
                "list",
                "struct",
                "timestamp",
                "decimal",
                "dictionary",
                "huge",
                "nan",
            ]
        )
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if kind == "good":
        if name == "label":
            return pa.array(np.arange(n) % 2)
        if name == "client":
            return pa.array(np.arange(n) % 5)
        return pa.array(rng.random(n))
    if kind in ("float32", "float16"):
        return pa.array(rng.random(n).astype(kind))
    if kind == "int":
        return pa.array(rng.integers(-3, 4, n))
    if kind == "bool":
        return pa.array(rng.random(n) < 0.5)
    if kind == "string":
        return pa.array([draw(st.sampled_from(TOKENS[:12])) for _ in range(n)])
    if kind == "null":
        return pa.nulls(n, pa.float64())
    if kind == "list":
        return pa.array([[float(x)] for x in rng.random(n)])
    if kind == "struct":
        return pa.array([{"a": float(x)} for x in rng.random(n)])
    if kind == "timestamp":
        return pa.array(np.arange(n), pa.timestamp("s"))
    if kind == "decimal":
        return pa.array(list(range(n)), pa.decimal128(5, 1))
    if kind == "dictionary":
        return pa.array([str(i % 2) for i in range(n)]).dictionary_encode()
    if kind == "huge":
        return pa.array(np.full(n, 2**62, np.int64))
    return pa.array(np.where(rng.random(n) < 0.3, np.nan, rng.random(n)))


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


@st.composite
def parquet_table(draw) -> tuple[str, bytes]:
    """(file name, bytes) of a binary scored table in Parquet: column types vary, bytes may be
    corrupted."""
    names = ["score", "label"] + (["client"] if draw(st.booleans()) else [])
    if draw(st.integers(0, 4)) == 0:
        names = draw(st.lists(st.sampled_from(COLUMN_NAMES[:4]), min_size=0, max_size=4))
    n = draw(st.integers(0, 24))
    arrays = [_column(draw, name, n) for name in names]
    table = pa.Table.from_arrays(arrays, names)
    return draw(st.sampled_from(["t.parquet", "t.pq"])), draw(corrupt(parquet_bytes(table)))


binary_table = st.one_of(csv_table(), parquet_table())


@st.composite
def multiclass_csv(draw) -> tuple[str, bytes]:
    """(file name, bytes) of a multiclass table: label and prob_*/logit_* columns."""
    c = draw(st.integers(1, 4))
    prefix = draw(st.sampled_from(["prob_", "prob_", "logit_", "p_"]))
    names = ["label", *(f"{prefix}{j}" for j in range(c))]
    if draw(st.integers(0, 5)) == 0:
        names = draw(st.permutations(names))
    if draw(st.booleans()):
        names.append("client")
    n = draw(st.integers(0, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    probs = rng.dirichlet(np.ones(c), n) if n else np.zeros((0, c))
    rows = []
    for i in range(n):
        cells = {"label": str(int(rng.integers(0, c))), "client": str(i % 6)}
        for j in range(c):
            v = probs[i, j] if prefix != "logit_" else math.log(max(probs[i, j], 1e-9))
            cells[f"{prefix}{j}"] = f"{v:.6f}"
        row = [cells.get(name, "0") for name in names]
        if draw(st.integers(0, 12)) == 0:
            row[draw(st.integers(0, len(row) - 1))] = draw(bad_cell)
        rows.append(",".join(row))
    text = "\n".join([",".join(names), *rows]) + "\n"
    return "mc.csv", draw(corrupt(text.encode("utf-8", "surrogatepass")))


# --- JSON documents ------------------------------------------------------------------------------

json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.sampled_from([10**400, -1, 0, 1, 2, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.sampled_from(["fedeval.aggregate/2", "fedeval.calibration-map/2", "distdp", "x" * 300]),
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def mutated_json(draw, doc: Any) -> bytes:
    """`doc` after a few edits at random depths (replace, delete, insert), serialised (NaN and
    Infinity may appear), sometimes then corrupted as bytes."""
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(0, 4))):
        doc = _edit(draw, doc)
    text = json.dumps(doc, allow_nan=True)
    return draw(corrupt(text.encode()))


def _edit(draw, node: Any) -> Any:
    """One edit somewhere inside `node`: descend while a coin says so, then act."""
    if isinstance(node, dict) and node and draw(st.integers(0, 2)) > 0:
        key = draw(st.sampled_from(sorted(node)))
        op = draw(st.sampled_from(["descend", "descend", "replace", "delete", "add"]))
        if op == "descend":
            node[key] = _edit(draw, node[key])
        elif op == "replace":
            node[key] = draw(json_value)
        elif op == "delete":
            del node[key]
        else:
            node[draw(st.text(max_size=8))] = draw(json_value)
        return node
    if isinstance(node, list) and node and draw(st.integers(0, 2)) > 0:
        i = draw(st.integers(0, len(node) - 1))
        op = draw(st.sampled_from(["descend", "descend", "replace", "delete", "append"]))
        if op == "descend":
            node[i] = _edit(draw, node[i])
        elif op == "replace":
            node[i] = draw(json_value)
        elif op == "delete":
            del node[i]
        else:
            node.append(draw(json_value))
        return node
    return draw(json_value)


@st.composite
def mutated_lines(draw, text: str) -> bytes:
    """A JSON Lines file (a ledger) with some lines edited, dropped, duplicated or added."""
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["edit", "edit", "drop", "duplicate", "add", "raw"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if op == "edit" and lines:
            try:
                doc = json.loads(lines[i])
            except ValueError:  # an earlier edit left text that is not JSON
                doc = None
            lines[i] = draw(mutated_json(doc)).decode("utf-8", "replace")
        elif op == "drop" and lines:
            del lines[i]
        elif op == "duplicate" and lines:
            lines.insert(i, lines[i])
        elif op == "add":
            lines.insert(i, json.dumps(draw(json_value), allow_nan=True))
        else:
            lines.insert(i, draw(st.sampled_from(TOKENS)))
    return draw(corrupt(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")))


# --- option values -----------------------------------------------------------------------------


def _num(values: list[str], ints: tuple[int, int] | None = None) -> st.SearchStrategy[str]:
    parts = [st.sampled_from(values), st.sampled_from(["", "abc", "nan", "inf", "-1", "1e9"])]
    if ints is not None:
        parts.append(st.integers(*ints).map(str))
    return st.one_of(*parts)


floats_text = st.floats(allow_nan=True, allow_infinity=True).map(repr)
epsilon = st.one_of(
    _num(["1", "0.5", "5", "1e-17", "800", "100", "1e-9", "0", "0.01"]), floats_text
)
height = _num(["auto", "1", "4", "20", "21", "3.5", "1e3", "0"], ints=(-3, 64))
quantiles = _num(["2", "100", "65536", "65537", "1"], ints=(-3, 70_000))
buckets = _num(["auto", "leaves", "8", "1048576", "1048577", "0"], ints=(-3, 2**21))
ci_draws = st.sampled_from(["0", "0", "3", "-1", "x"])
shape = st.sampled_from(["auto", "flat", "hierarchy", "tree", ""])
model = st.sampled_from(["federated", "distdp", "localdp", "central", ""])
thresholds = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=4).map(
        lambda xs: ",".join(map(repr, xs))
    ),
    st.lists(st.floats(0, 1), min_size=1, max_size=6).map(lambda xs: ",".join(map(str, xs))),
    st.sampled_from(["0.5", "0.5,0.5", ",", "a,b", "0.1;0.2", "1e400"]),
)
score_range = st.one_of(
    st.tuples(floats_text, floats_text).map(",".join),
    st.sampled_from(["0,1", "-5,5", "1,0", "0,0", "0", "0,1,2", "-1e308,1e308", "a,b"]),
)
pos_label = st.one_of(st.sampled_from(["1", "0", "yes", "True", "1.0", ""]), st.text(max_size=4))
gate_spec = st.one_of(
    st.sampled_from(
        [
            "auc=0.5",
            "ece=nan",
            "recall@0.5=0.1",
            "precision@2=0.1",
            "x=1",
            "auc",
            "auc=",
            "=0.5",
            "ap=0.9,auc=0.1",
            "accuracy@0.5=inf",
        ]
    ),
    st.tuples(
        st.sampled_from(["auc", "ap", "ece", "roc_auc_curve", "recall@0.5"]), floats_text
    ).map("=".join),
)
output_path = st.sampled_from(
    [
        "out.json",
        "out.json",
        "-",
        "sub/out.json",
        ".",
        "",
        "out.csv",
        "out.parquet",
        "out.json.gz",
        "out.zst",
        "good.csv",
        "/proc/nope/out.json",
        "out/",
        "x\x00y",
    ]
)
plot_path = st.sampled_from(["p.png", "p.svg", "plots/", "p.pdf", "p", "/proc/nope/p.png", ""])
columns = st.sampled_from(["score", "label", "client", "nope", "", "Score"])
