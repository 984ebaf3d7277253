"""Same results bit for bit: a digest of every command's JSON, seed 1, to compare across a change.

Runs `evaluate`, `curves`, `calibrate --method binning|bbq` for every model (federated, distdp,
localdp) on the sample scores and on a rare-positive file it makes deterministically (50,000
rows, 1.5 % positives), and `calibrate --multiclass` for every method (with and without ε) on
the sample multiclass file; each with `--seed 1 --format json`. Each output is read as JSON,
the fields that legitimately vary are masked (wall-clock times, the version string, module
paths quoted in prose, the input's path, and hence the seal's digest of the raw text), and the
canonical dump is hashed.

    .venv/bin/python benchmarks/bitforbit.py --write benchmarks/_data/bitforbit.json
    .venv/bin/python benchmarks/bitforbit.py --compare benchmarks/_data/bitforbit.json

`--compare` prints every run whose digest differs (with the first differing JSON path) and
exits 1 if any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data" / "scores.parquet"
MULTICLASS = ROOT / "sample_data" / "multiclass.parquet"
DATA_DIR = ROOT / "benchmarks" / "_data"
RARE = DATA_DIR / "bitforbit_rare.parquet"

MODELS = ("federated", "distdp", "localdp")
MULTICLASS_METHODS = ("fedbin", "fedbbq", "fedtemp")
# Keys whose values are wall-clock measurements or the installed version, not results.
MASKED_KEYS = frozenset({"seconds", "elapsed", "wall_s", "wall_seconds", "fedeval_version"})
# Prose may name the module that holds a rule ("by fedeval.core.params.probe_height"): a move
# renames it without changing any result.
MODULE_PATH = re.compile(r"fedeval(\.[A-Za-z_][A-Za-z0-9_]*)+")


def make_rare(path: Path) -> None:
    """50,000 rows, 1.5 % positives ~ Beta(5, 2), negatives ~ Beta(1, 6); fixed seed."""
    rng = np.random.default_rng(20261126)
    n = 50_000
    label = (rng.random(n) < 0.015).astype(np.int64)
    score = np.where(label == 1, rng.beta(5.0, 2.0, n), rng.beta(1.0, 6.0, n))
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"score": score, "label": label}).to_parquet(path, index=False)


def runs() -> dict[str, list[str]]:
    """Run name → fedeval arguments."""
    out: dict[str, list[str]] = {}
    for name, data in (("sample", SAMPLE), ("rare", RARE)):
        for model in MODELS:
            base = ["-m", model, "--seed", "1", "--format", "json"]
            out[f"evaluate/{name}/{model}"] = ["evaluate", str(data), *base]
            out[f"curves/{name}/{model}"] = ["curves", str(data), *base]
            for method in ("binning", "bbq"):
                out[f"calibrate-{method}/{name}/{model}"] = [
                    "calibrate",
                    str(data),
                    *base,
                    "--method",
                    method,
                ]
    for method in MULTICLASS_METHODS:
        base = ["calibrate", str(MULTICLASS), "--multiclass", "--method", method, "--seed", "1"]
        out[f"multiclass/{method}/nodp"] = [*base, "--format", "json"]
        out[f"multiclass/{method}/eps1"] = [*base, "-e", "1", "--format", "json"]
    return out


def masked(value: Any) -> Any:
    """The JSON value with the legitimately varying fields replaced by a marker."""
    if isinstance(value, dict):
        out = {k: ("<masked>" if k in MASKED_KEYS else masked(v)) for k, v in value.items()}
        if isinstance(out.get("integrity"), dict):
            # The seal digests the raw text, module paths included: compared through the content.
            out["integrity"] = {k: "<masked>" for k in out["integrity"]}
        return out
    if isinstance(value, list):
        return [masked(v) for v in value]
    if isinstance(value, str):
        text = value.replace(str(ROOT), "<root>")
        return MODULE_PATH.sub("fedeval.<module>", text)
    return value


def run_one(args: list[str]) -> Any:
    """The masked JSON output of one fedeval command (its exit code kept beside it)."""
    proc = subprocess.run(
        [sys.executable, "-m", "fedeval", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    try:
        body: Any = json.loads(proc.stdout)
    except json.JSONDecodeError:
        body = {"stdout": proc.stdout, "stderr": proc.stderr[-2000:]}
    return {"exit": proc.returncode, "output": masked(body)}


def digest(value: Any) -> str:
    """SHA-256 of the canonical JSON dump (floats as Python's repr: every bit counts)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def first_difference(a: Any, b: Any, path: str = "$") -> str:
    """The first JSON path at which two values differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}: only in {'new' if key in b else 'baseline'}"
            if a[key] != b[key]:
                return first_difference(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {str(a)[:120]!r} != {str(b)[:120]!r}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="write the digests (and outputs) here")
    group.add_argument("--compare", type=Path, help="compare against digests written before")
    parser.add_argument("--jobs", type=int, default=2)
    ns = parser.parse_args()
    if not RARE.exists():
        make_rare(RARE)
    table = runs()
    with ThreadPoolExecutor(ns.jobs) as pool:
        results = dict(zip(table, pool.map(run_one, table.values()), strict=True))
    digests = {name: digest(value) for name, value in results.items()}
    if ns.write is not None:
        ns.write.parent.mkdir(parents=True, exist_ok=True)
        ns.write.write_text(
            json.dumps({"digests": digests, "outputs": results}, indent=1, sort_keys=True)
        )
        for name, d in digests.items():
            print(f"{d[:16]}  exit {results[name]['exit']}  {name}")
        print(f"{len(digests)} runs written to {ns.write}")
        return 0
    baseline = json.loads(ns.compare.read_text())
    differ = 0
    for name, d in digests.items():
        old = baseline["digests"].get(name)
        if old == d:
            continue
        differ += 1
        where = (
            first_difference(baseline["outputs"][name], results[name])
            if old is not None
            else "new run"
        )
        print(f"DIFFERS {name}: {where}")
    missing = sorted(set(baseline["digests"]) - set(digests))
    for name in missing:
        print(f"MISSING {name}")
    total = len(digests)
    print(
        f"{total - differ} of {total} runs identical"
        + (f", {len(missing)} missing" if missing else "")
    )
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main())
