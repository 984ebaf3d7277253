"""Why a hard.py row's precision, recall or accuracy interval misses: per threshold, the
coverage, the side the truth falls out on, the estimate's bias and its spread against the
interval's noise σ, over many releases of one hard.py setting (issue 25).

For each threshold t and metric the release gives an estimate x (its worst-case range's centre:
the leaves' corners, unclipped) and the noise σ of its 200 re-noised draws. Over R releases of
one data set (DP: the noise varies) with the truth μ fixed, z = (x − μ)/σ should have mean 0
and spread 1: a mean away from 0 is a bias the interval does not hold, a spread above 1 a σ
that is too small. ``miss lo`` is the share of releases whose interval lies above μ, ``miss
hi`` below it. The interval is Fieller's pivot on the metric's ratio; ``σ-cov`` is what main's
interval before it (x ± z·σ around the worst-case range, `interval_around`) held on the same
releases, ``width÷σ-int`` the median ratio of the two widths.

The thresholds' intervals share the release's noise (the class totals, nested sums), so the
pooled coverage of T thresholds over R releases is not a binomial count of R·T trials: its
standard error is the spread of each release's covered share over √R (releases as clusters).
``band`` is 1.96 of that, at R releases and at hard.py's --dp-releases 200; hard.py's verdict
uses the binomial band of R·T independent intervals, which is narrower.

    .venv/bin/python benchmarks/threshold_misses.py onevalue localdp --releases 1000
    .venv/bin/python benchmarks/threshold_misses.py pointmass localdp --height 5
"""

from __future__ import annotations

import argparse
import time

import hard
import numpy as np

from fedeval.estimate.metric_registry import THRESHOLD_METRIC_NAMES, threshold_parts_of
from fedeval.estimate.uncertainty import interval_around


def collect(
    family: str, model: str, releases: int, start: int, height: int | str, n: int
) -> np.ndarray:
    """(metric, release, threshold, field) with fields (estimate x, truth, ci lo, ci hi, σ,
    σ-interval lo, hi): the release's interval (Fieller's pivot) and the interval of its
    estimate ± z·σ around the worst-case range (`interval_around`: main before issue 25's
    pivot), on the same release."""
    thr = list(hard.THRESHOLDS[family])
    kw: dict = {
        "model": model,
        "epsilon": hard.EPSILON[model],
        "thresholds": thr,
        "height": height,
        "ci_draws": 200,
    }
    if model == "distdp":
        kw["level_split"] = hard.DEFAULT_LEVEL_SPLIT
    data = None if family in hard.REDRAWN else hard.build(family, n, 0)
    out = np.full((len(THRESHOLD_METRIC_NAMES), releases, len(thr), 7), np.nan)
    for r in range(releases):
        seed = start + r
        ev = hard.evaluate_data(
            hard.build(family, n, seed) if data is None else data, seed=seed, **kw
        )
        run = ev.run
        unit = run.to_unit(np.asarray(thr, dtype=np.float64))
        parts = threshold_parts_of(run.histogram.leaves, run.noise_draws, unit)
        for k, name in enumerate(THRESHOLD_METRIC_NAMES):
            sd, bounds, _ = parts[k]
            for i, row in enumerate(ev.thresholds):
                e = getattr(row, name)
                lo, hi = (np.nan, np.nan) if e.ci95 is None else e.ci95
                old = (
                    (lo, hi)
                    if e.note is not None
                    else interval_around(e.estimate, sd[i], bounds[i])
                )
                x = (bounds[i, 0] + bounds[i, 1]) / 2
                truth = np.nan if e.exact is None else e.exact
                out[k, r, i] = (x, truth, lo, hi, sd[i], *old)
    return out


def report(table: np.ndarray, thresholds: tuple[float, ...]) -> None:
    releases = table.shape[1]
    print(
        f"{'metric':9s} {'t':>9s} {'truth':>7s} {'cov':>6s} {'miss lo':>7s} {'miss hi':>7s} "
        f"{'z mean':>7s} {'z sd':>6s} {'σ':>9s} {'σ-cov':>6s} {'width÷σ-int':>11s}"
    )
    for k, name in enumerate(THRESHOLD_METRIC_NAMES):
        x, mu, lo, hi, sd, old_lo, old_hi = np.moveaxis(table[k], -1, 0)
        covered = (lo <= mu) & (mu <= hi)
        old_covered = (old_lo <= mu) & (mu <= old_hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (x - mu) / sd
            ratio = np.nanmedian((hi - lo) / (old_hi - old_lo), axis=0)
        for i, t in enumerate(thresholds):
            print(
                f"{name:9s} {t:9.6g} {np.nanmean(mu[:, i]):7.4f} {covered[:, i].mean():6.3f} "
                f"{np.mean(lo[:, i] > mu[:, i]):7.3f} {np.mean(hi[:, i] < mu[:, i]):7.3f} "
                f"{np.nanmean(z[:, i]):+7.2f} {np.nanstd(z[:, i]):6.2f} {np.nanmean(sd[:, i]):9.2e}"
                f" {old_covered[:, i].mean():6.3f} {ratio[i]:11.4f}"
            )
        share = covered.mean(axis=1)  # each release's covered share of its thresholds
        se = share.std(ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            pooled_ratio = np.nanmedian((hi - lo) / (old_hi - old_lo))
        print(
            f"{name:9s} pooled {share.mean():.3f} (σ-interval {old_covered.mean():.3f}, width "
            f"÷ σ-interval's: median {pooled_ratio:.4f}) over "
            f"{releases} releases × {len(thresholds)} thresholds; band ±"
            f"{1.96 * se / np.sqrt(releases):.3f} (at 200 releases ±{1.96 * se / np.sqrt(200):.3f};"
            " binomial of 1,000 ±0.014)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("family", choices=hard.FAMILIES)
    ap.add_argument("model", choices=("distdp", "localdp"))
    ap.add_argument("--releases", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0, help="first noise seed (hard.py: 0)")
    ap.add_argument("--height", default="auto", help="release height (default auto)")
    ap.add_argument("--rows", type=int, default=100_000, help="hard.py --quick: 100,000")
    args = ap.parse_args()
    height = args.height if args.height == "auto" else int(args.height)
    t0 = time.perf_counter()
    table = collect(args.family, args.model, args.releases, args.start, height, args.rows)
    print(
        f"{args.family} · {args.model} ε={hard.EPSILON[args.model]:g} unit example, height "
        f"{args.height}, {args.rows:,} rows, seeds {args.start}–{args.start + args.releases - 1} "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    report(table, hard.THRESHOLDS[args.family])


if __name__ == "__main__":
    main()
