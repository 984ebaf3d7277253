"""Where the ECE interval's width comes from, per family × model of `benchmarks/hard.py`.

For R releases of one setting (hard.py's data, thresholds, auto heights, seeds 0 … R − 1; a
DP setting keeps data draw 0, a federated one draws afresh), the scores' 15-bin ECE interval
(`fedeval.api.calibrate.release_ece`) taken apart, medians over the releases:

- noise−/noise+: the hull over the candidate truths (`ece_estimate` without a
  discretisation term), below and above the estimate;
- disc−/disc+: `discretisation_parts`' range (the smooth parts' slope offsets, the departing
  examples' and end leaves' worst case);
- samp−/samp+: its sampling band (where the smooth examples fall about a bin edge and sit
  inside their parts, given the counts);
- |err|: the estimate against the truth (the raw scores' ECE), split into |e_nz| (against
  the smooth reading of the exact leaf counts, `split_gaps`) and |e_dsc| (that reading
  against the truth);
- cov: how often the interval holds the truth; covA and widthA: the same parts added side by
  side (noise + disc + samp, the combination before the bias-aware half-width of
  `fedeval.estimate.ece.bias_aware_half`), on the same releases; covN and covR: how often the
  noise's part alone holds the truth and the exact counts' reading; worst: the share of [0, 1]
  intervals.

`--old` gives the interval before the smooth reading (every example anywhere in its leaf, the
leaves read whole at their midpoints), for comparison on the same releases.

    .venv/bin/python benchmarks/ece_width.py --families smooth tree --models distdp -R 50
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from hard import EPSILON, FAMILIES, SMALL_ROWS, build, generate

from fedeval.api.calibrate import debiasing_draws, release_ece
from fedeval.api.curves import release_departures
from fedeval.core.spec import release_spec
from fedeval.estimate.ece import ece_estimate, split_gaps
from fedeval.estimate.ece_range import discretisation_parts, discretisation_range, smooth_offsets
from fedeval.estimate.smoothness import with_end_leaves
from fedeval.protocol.simulate import simulate

N_BINS = 15


def midpoint_reading(y: np.ndarray, s: np.ndarray, edges: np.ndarray, mid: np.ndarray) -> float:
    """Σ|D_b|/N of the exact leaf counts read as the estimate reads them (`split_gaps`): what
    it reads with the noise taken away."""
    leaf = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, len(mid) - 1)
    counts = np.stack([np.bincount(leaf[y == c], minlength=len(mid)) for c in (0, 1)])
    return float(np.abs(split_gaps(counts.astype(float), edges, N_BINS)).sum() / len(y))


def est_disc(leaves, edges, departing, draws) -> tuple[float, float, float, float]:
    """The discretisation term `release_ece` adds (its end leaves at their worst)."""
    smooth = smooth_offsets(leaves, edges)
    return discretisation_parts(leaves, edges, with_end_leaves(departing), N_BINS, smooth=smooth)


def one(
    family: str, model: str, n: int, seed: int, data, raw, height, old: bool
) -> dict[str, float]:
    kw = {"model": model, "epsilon": EPSILON[model], "height": height, "ci_draws": 200}
    run = simulate(data, spec=release_spec(None, kw))  # type: ignore[arg-type]
    leaves = run.histogram.leaves
    n_leaves = leaves.shape[-1]
    edges = run.axis.leaf_edges(n_leaves)
    mid = run.axis.leaf_midpoints(n_leaves)
    departing = release_departures(run) if run.ci_draws else None
    draws = debiasing_draws(run)
    assert departing is not None
    if old:  # the interval before the smooth reading: every example anywhere in its leaf
        below, above = discretisation_range(leaves, edges, departing, N_BINS)
        s_below = s_above = 0.0
        est = ece_estimate(leaves, draws, mid, n_bins=N_BINS, discretisation=(below, above))
    else:
        est = release_ece(run, N_BINS, None, departing)
        below, above, s_below, s_above = est_disc(leaves, edges, departing, draws)
    value = est.estimate
    noise = None
    if draws is not None:
        read = None if old else edges
        noise = ece_estimate(leaves, draws, mid, n_bins=N_BINS, edges=read)
    n_lo, n_hi = (value, value) if noise is None or noise.ci95 is None else noise.ci95
    y, s = raw
    truth = float(
        np.abs(
            np.bincount(np.minimum((s * N_BINS).astype(int), N_BINS - 1), y - s, minlength=N_BINS)
        ).sum()
        / len(y)
    )
    reading = midpoint_reading(y, s, edges, mid)
    lo, hi = est.ci95 if est.ci95 is not None else (np.nan, np.nan)
    # The same parts added side by side (the combination before the bias-aware half-width).
    add_lo = min(max(n_lo - below - s_below, 0.0), value)
    add_hi = max(min(n_hi + above + s_above, 1.0), value)
    if est.note is not None:
        add_lo, add_hi = lo, hi
    return {
        "covered": float(lo <= truth <= hi),
        "width": hi - lo,
        "cov_add": float(add_lo <= truth <= add_hi),
        "width_add": add_hi - add_lo,
        "noise_lo": value - n_lo,
        "noise_hi": n_hi - value,
        "disc_lo": below,
        "disc_hi": above,
        "samp_lo": s_below,
        "samp_hi": s_above,
        "err": value - truth,
        "err_noise": value - reading,
        "err_disc": reading - truth,
        "leaves": float(n_leaves),
        "truth": truth,
        "worst": float(est.note is not None),
        "cov_noise": float(n_lo <= truth <= n_hi),
        "cov_read": float(n_lo <= reading <= n_hi),
    }


def run_setting(family: str, model: str, n: int, releases: int, height, old: bool) -> list[dict]:
    redraw = model == "federated"
    data = None if redraw else build(family, n, 0)
    raw = None
    if not redraw:
        y, s, _ = generate(family, n, 0)
        raw = (y.astype(float), s)
    out = []
    for r in range(releases):
        d = data
        rw = raw
        if redraw:
            d = build(family, n, r)
            y, s, _ = generate(family, n, r)
            rw = (y.astype(float), s)
        out.append(one(family, model, n, r, d, rw, height, old))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", nargs="+", choices=FAMILIES, default=["smooth"])
    ap.add_argument("--models", nargs="+", default=["distdp", "localdp"])
    ap.add_argument("-R", "--releases", type=int, default=50)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--height", default="auto")
    ap.add_argument(
        "--old", action="store_true", help="the interval before the smooth reading (worst case)"
    )
    args = ap.parse_args()
    height = args.height if args.height == "auto" else int(args.height)
    print(
        f"{'family':<13} {'model':<9} {'R':>4} {'L':>6} {'cov':>6} {'width':>8} "
        f"{'noise-':>8} {'noise+':>8} {'disc-':>8} {'disc+':>8} {'samp-':>8} {'samp+':>8} "
        f"{'|err|':>8} {'covA':>6} {'widthA':>8} "
        f"{'|e_nz|':>8} {'|e_dsc|':>8} {'truth':>7} {'worst':>5} {'covN':>5} {'covR':>5}"
    )
    for fam in args.families:
        for model in args.models:
            t0 = time.perf_counter()
            n = SMALL_ROWS.get(fam, args.rows)
            rows = run_setting(fam, model, n, args.releases, height, args.old)
            col = {k: np.array([r[k] for r in rows]) for k in rows[0]}
            med = {k: float(np.median(v)) for k, v in col.items()}
            print(
                f"{fam:<13} {model:<9} {len(rows):>4} {med['leaves']:>6.0f} "
                f"{col['covered'].mean():>6.3f} {med['width']:>8.2e} "
                f"{med['noise_lo']:>8.2e} {med['noise_hi']:>8.2e} {med['disc_lo']:>8.2e} "
                f"{med['disc_hi']:>8.2e} {med['samp_lo']:>8.2e} {med['samp_hi']:>8.2e} "
                f"{np.median(np.abs(col['err'])):>8.2e} "
                f"{col['cov_add'].mean():>6.3f} {med['width_add']:>8.2e} "
                f"{np.median(np.abs(col['err_noise'])):>8.2e} "
                f"{np.median(np.abs(col['err_disc'])):>8.2e} {med['truth']:>7.4f} "
                f"{col['worst'].mean():>5.2f} {col['cov_noise'].mean():>5.2f} "
                f"{col['cov_read'].mean():>5.2f}",
                flush=True,
            )
            print(f"  {fam} {model}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
