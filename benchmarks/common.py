"""Paths and data sets the benchmarks share (run them from anywhere: paths are absolute)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data" / "scores.parquet"
DATA_DIR = ROOT / "benchmarks" / "_data"
BIG = DATA_DIR / "scores_500k.parquet"


def ensure_big() -> Path:
    """The 500k-row set, made on first use by the sample's own script (seeded, gitignored)."""
    if not BIG.exists():
        print("making the 500k-row set with sample_data/make_sample.py …", file=sys.stderr)
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "sample_data" / "make_sample.py"),
                "--rows",
                "500000",
                "-o",
                str(BIG),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return BIG
