"""`--height auto` against the height it picked, paired: does the probe bias the tree's counts or
shorten the interval draws' σ (issue 25)?

For each seed, one hard.py data set (unit example, the same data for every seed) is released
twice: with `--height auto` (a probe round chooses h, then the tree at h) and at the fixed h
that auto chose, with the same seed. At every declared threshold t of the family, the counts
P/R/A read from the decoded leaves, positives ≥ t and negatives ≥ t, are compared with their
exact values: `bias` is the mean error over the releases (± its standard error), `diff` the
mean paired difference auto − fixed (±), and `z sd` the spread of (x − μ)/σ, σ the spread of
the release's own 200 interval draws of that count (1 when the draws are calibrated; its
standard error is about 1/√(2R)). The class totals are the row t = 0.

    .venv/bin/python benchmarks/auto_vs_fixed.py onevalue --releases 2000
    .venv/bin/python benchmarks/auto_vs_fixed.py pointmass --releases 2000
"""

from __future__ import annotations

import argparse
import time

import hard
import numpy as np

from fedeval.protocol.simulate import simulate


def counts_above(leaves: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """(..., 2, T): each class's count at or above each threshold (cell edges, `unit` on [0, 1])
    of leaves (..., 2, L)."""
    width = leaves.shape[-1]
    cut = np.rint(np.asarray(unit) * width).astype(np.int64)
    tail = np.cumsum(leaves[..., ::-1], axis=-1)[..., ::-1]  # tail[j] = Σ_{i ≥ j}
    tail = np.concatenate([tail, np.zeros((*leaves.shape[:-1], 1))], axis=-1)
    out: np.ndarray = tail[..., cut]
    return out


def collect(
    family: str, model: str, releases: int, start: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x (2, R, 2, T): auto's and the fixed height's counts, σ likewise, μ (2, T), heights (R))."""
    data = hard.build(family, n, 0)
    thr = np.asarray((0.0, *hard.THRESHOLDS[family]), np.float64)
    unit = np.asarray(data.axis.to_unit(thr))
    truth = counts_above(data.leaf_counts(data.resolution).astype(np.float64), unit)
    x = np.empty((2, releases, 2, len(thr)))
    sd = np.empty_like(x)
    heights = np.empty(releases, np.int64)
    kw: dict = {"model": model, "epsilon": hard.EPSILON[model], "ci_draws": 200}
    if model == "distdp":
        kw["level_split"] = hard.DEFAULT_LEVEL_SPLIT  # as hard.py releases it
    for r in range(releases):
        seed = start + r
        auto = simulate(data, height="auto", seed=seed, **kw)
        h = auto.config.height
        fixed = simulate(data, height=h, seed=seed, **kw)
        heights[r] = h
        for i, run in enumerate((auto, fixed)):
            draws = run.noise_draws
            assert draws is not None
            x[i, r] = counts_above(run.histogram.leaves, unit)
            sd[i, r] = counts_above(draws, unit).std(axis=0, ddof=1)
    return x, sd, truth, heights


def report(family: str, x: np.ndarray, sd: np.ndarray, truth: np.ndarray) -> None:
    releases = x.shape[1]
    err = x - truth
    z = err / sd
    diff = x[0] - x[1]
    root = np.sqrt(releases)
    print(
        f"{'count':8s} {'t':>9s} {'truth':>8s} {'auto bias':>14s} {'fixed bias':>14s} "
        f"{'diff':>14s} {'z sd auto':>9s} {'z sd fixed':>10s}"
    )
    for c, name in ((1, "pos ≥ t"), (0, "neg ≥ t")):
        for j, t in enumerate((0.0, *hard.THRESHOLDS[family])):
            cells = [
                f"{v[:, c, j].mean():+7.1f} ±{v[:, c, j].std(ddof=1) / root:5.1f}"
                for v in (err[0], err[1], diff)
            ]
            print(
                f"{name:8s} {t:9.6g} {truth[c, j]:8.0f} {cells[0]:>14s} {cells[1]:>14s} "
                f"{cells[2]:>14s} {z[0, :, c, j].std():9.3f} {z[1, :, c, j].std():10.3f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("family", choices=hard.FAMILIES)
    ap.add_argument("--model", choices=("localdp", "distdp"), default="localdp")
    ap.add_argument("--releases", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0, help="first noise seed (hard.py: 0)")
    ap.add_argument("--rows", type=int, default=100_000, help="hard.py --quick: 100,000")
    args = ap.parse_args()
    if args.family in hard.REDRAWN:
        ap.error(f"{args.family} redraws its data per release; pick a family with fixed data")
    t0 = time.perf_counter()
    x, sd, truth, heights = collect(args.family, args.model, args.releases, args.start, args.rows)
    hs, count = np.unique(heights, return_counts=True)
    picked = ", ".join(f"h = {h}: {c}" for h, c in zip(hs, count, strict=True))
    print(
        f"{args.family} · {args.model} ε={hard.EPSILON[args.model]:g} unit example, "
        f"{args.rows:,} rows, seeds {args.start}–{args.start + args.releases - 1}, auto picked "
        f"{picked} ({time.perf_counter() - t0:.0f} s)"
    )
    report(args.family, x, sd, truth)


if __name__ == "__main__":
    main()
