"""Does splitting the tree's ε over its levels bring `--height auto` within 1.25× of the best
fixed height? (distdp, `fedeval.privacy.level_split`; a prototype: the library has the split,
this script sets it, no CLI option does yet.)

The split: a share s of the tree's ε evenly over the levels up to f, the thresholds' alignment
level (the least height auto may pick: the level at which every declared threshold is a cell
edge), 1 − s over the finer ones. s = 0.8 = 1/1.25 by the target itself: a count of [t, 1] at a
level-f edge is read from at most one node per level ≤ f, each at s·ε/f instead of the
height-f tree's ε/f, so its noise sd is at most 1/s = 1.25× that tree's whatever the height
(the finer levels' measurements, combined by least squares, only lower it); no family's
numbers chose it.

For each of `benchmarks/height.py`'s quick families (distdp ε = 1, n = 100k, tiny 2k), R noise
draws (seeds 1000 + r, as height.py) of: auto with the even tree, auto with the split, and
every fixed height with the even tree (from `--cache`, height.py's layout, where stored) and,
with `--split-fixed`, with the split. Per metric (AUC, AP, worst P/R/A over the 5 thresholds)
the cross-fitted ratio of auto's median |error| to the best fixed height's (height.py's
`cross_fitted`), and the count of cells within 1.25×.

    .venv/bin/python benchmarks/level_split.py --draws 40 --cache DIR [--split-fixed]

Measured (--draws 40 --split-fixed, the 12 quick families at 100k, tiny 2k; f = 4 on all; the
height auto chose is the same with and without the split, `fedeval.privacy.probe.count_sd`):

    auto even vs fixed even: 22 of 60 within 1.25x (AUC 7/12, AP 4/12, P/R/A 11/36)
    auto split vs fixed even: 38 of 60 within 1.25x (AUC 9/12, AP 3/12, P/R/A 26/36)
    auto split vs fixed split: 38 of 60 within 1.25x (AUC 8/12, AP 4/12, P/R/A 26/36)

Where auto chooses h = f (rare, tiny, ultrarare, ultrarare-2m) the split changes nothing. Worst
P/R/A ratios left with the split: smooth precision 1.91 (the sparse-threshold rule reads the
top leaves, which the split makes noisier), clipped 1.47–1.57, tree recall 1.45; AP worse on
smooth (1.23 → 1.79), grid (1.55 → 1.84) and squeezed (1.85 → 2.29): AP reads fine leaves.
Coverage of the 95% intervals with the split (300 releases, auto): smooth 0.937–0.973 on
every metric; squeezed 0.943–0.967, AP 0.997.

`--model localdp` (ε = 5) splits the reports instead (`fedeval.privacy.report_split`: a share
s of the tree reports to the levels ≤ f), and the height choice sees the split
(`fedeval.privacy.probe.count_sd`'s per-metric rows). Measured (--draws 40, the same 12 quick
families, f = 4 on all; at h ≤ f the split is the uniform tree: rare, tiny, ultrarare,
ultrarare-2m unchanged):

    s = 0.8:  auto uniform vs fixed uniform: 52 of 60 within 1.25x (AUC 10/12, AP 8/12, P/R/A 34/36)
              auto split vs fixed uniform:   52 of 60 within 1.25x (AUC 10/12, AP 7/12, P/R/A 35/36)
              auto split vs fixed split:     51 of 60 within 1.25x (AUC 9/12, AP 8/12, P/R/A 34/36)
    s = 0.64: auto split vs fixed uniform:   51 of 60 within 1.25x (AUC 9/12, AP 8/12, P/R/A 34/36)
    s = 0.8, the height chosen as for the uniform tree (count_sd's factors set to 1):
              auto split vs fixed uniform:   53 of 60 within 1.25x (AUC 9/12, AP 8/12, P/R/A 36/36)

(A median of 40 errors is known to about ±20%, so 51–53 of 60 are one result.) With s = 0.8 and
the split-aware choice, auto goes one level finer on tree, squeezed, bimodal and onevalue.
Better: tree precision 1.47 → 0.40 (error 7.9e-2 → 1.1e-2), squeezed recall 1.33 → 1.03, bimodal
P/R/A errors −20 to −34%, clipped AP 1.64 → 1.33; worse: squeezed AP 0.91 → 1.88, onevalue
recall 1.14 → 1.78 and precision 0.72 → 1.22. At fixed heights ≥ 8 the split's P/R/A errors are
10–40% below the uniform tree's on most families. Not the localdp default: no gain in the count,
and smooth scores at 200k rows (auto, 40 draws, worst of 5 thresholds) lose a little: precision
3.38e-3 → 3.75e-3, recall 2.39e-3 → 2.92e-3, AP 1.83e-3 → 2.91e-3 (auto h 5 → 6).

Coverage (benchmarks/hard.py --quick --models localdp --dp-releases 200, every family,
ReleaseSpec.config set to split as here): the rows under 0.93 are onevalue recall 0.919 and
logistic-rare AP 0.905 uniform; smooth AUC 0.925, squeezed AP 0.910 (uniform 0.970) and
logistic-rare AP 0.905 (h = f: the split inert) with the split, which lifts onevalue recall to
0.934. Smooth at 100k: precision 5.40e-3 → 4.82e-3, recall 3.75e-3 → 3.68e-3, accuracy 3.15e-3 →
3.07e-3; interval widths equal or narrower (tree recall 1.66e-2 → 1.52e-2, squeezed recall
2.21e-2 → 1.95e-2).
Squeezed AP at a fixed h = 9 (the height the split-aware auto picks there; 200 releases):
coverage 0.960 with the split, 0.925 uniform, so its 0.910 under auto is the AP's coverage at
the finer heights auto then picks, not the split's draws.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import hard
import height
import numpy as np

from fedeval.api.evaluate import evaluate_data
from fedeval.core import spec as spec_module
from fedeval.core.config import PrivacyModel
from fedeval.core.params import AUTO_MAX_HEIGHT

SHARE = 0.8
"""s = 1/1.25 (module docstring)."""

_config = spec_module.ReleaseSpec.config


def _with_split(share: float):
    """`ReleaseSpec.config` with the split at f = the thresholds' alignment level (min_height)."""

    def config(self, *, n, min_height=0, probe=True):
        cfg = _config(self, n=n, min_height=min_height, probe=probe)
        if share and min_height and cfg.model is not PrivacyModel.FEDERATED:
            return replace(cfg, split_level=min_height, split_share=share)
        return cfg

    return config


def _errors(data, h, draws, kw, share):
    spec_module.ReleaseSpec.config = _with_split(share)  # type: ignore[method-assign]
    try:
        errs, used = [], []
        for r in range(draws):
            ev = evaluate_data(data, height=h, seed=1000 + r, ci_draws=0, **kw)
            errs.append(height.errors(ev))
            used.append(ev.config.height)
        return np.asarray(used, float), np.asarray(errs)
    finally:
        spec_module.ReleaseSpec.config = _config  # type: ignore[method-assign]


def run(task):
    family, n, draws, cache, split_fixed, share, model = task
    t0 = time.perf_counter()
    data = hard.build(family, n, 0)
    eps = height.MODELS[model]
    kw = {"model": model, "epsilon": eps, "thresholds": list(hard.THRESHOLDS[family])}
    floor = data.axis.auto_floor(data.resolution)
    top = min(AUTO_MAX_HEIGHT[PrivacyModel(model)], hard.RESOLUTION)
    heights = [h for h in range(2, top + 1) if h >= floor] or [floor]
    even = _errors(data, "auto", draws, kw, 0.0)
    split = _errors(data, "auto", draws, kw, share)
    key = (family, n, model, draws, cache)
    fixed = {
        h: height.fixed(h, lambda h=h: _errors(data, h, draws, kw, 0.0)[1], key) for h in heights
    }
    split_key = (family, n, f"{model}-split{share:g}", draws, cache)
    fixed_split = {  # at h ≤ f a split is the even tree (one side empty)
        h: fixed[h]
        if h <= floor
        else height.fixed(h, lambda h=h: _errors(data, h, draws, kw, share)[1], split_key)
        for h in (heights if split_fixed else [])
    }
    print(f"  {family}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return family, n, floor, even, split, fixed, fixed_split


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--share", type=float, default=SHARE)
    ap.add_argument(
        "--families", nargs="+", choices=hard.FAMILIES, default=list(height.QUICK_FAMILIES)
    )
    ap.add_argument("--cache", help="height.py's folder of the fixed heights' errors")
    ap.add_argument("--split-fixed", action="store_true", help="also every fixed height split")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--model", choices=tuple(height.MODELS), default="distdp")
    args = ap.parse_args()
    sizes = dict.fromkeys(hard.FAMILIES, 100_000) | hard.SMALL_ROWS
    tasks = [
        (f, sizes[f], args.draws, args.cache, args.split_fixed, args.share, args.model)
        for f in args.families
    ]
    what = "of ε" if args.model == "distdp" else "of the reports"
    print(
        f"{args.model} ε = {height.MODELS[args.model]:g}, {args.draws} draws; split {what}: "
        f"share {args.share:g} to the levels ≤ f (f: the"
    )
    print("thresholds' alignment level); xfit = auto's median |error| / the best fixed height's,")
    print("cross-fitted (height.py). ref even: fixed heights with the even tree; ref split: split")
    head = (
        f"{'family':<10} {'f':>2} {'metric':<9} {'h even':>6} {'h split':>7} {'err even':>9} "
        f"{'err split':>9} {'xfit even':>9} {'xfit split':>10}"
    )
    if args.split_fixed:
        head += f" {'split/split':>11}"
    print(head)
    within = np.zeros(3, int)
    per_metric = np.zeros((3, len(height.METRICS)), int)
    rows = 0
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for fam, _n, floor, even, split, fixed, fixed_split in pool.map(run, tasks):
            stack = np.stack([fixed[h] for h in sorted(fixed)])
            x_even = height.cross_fitted(even[1], stack)
            x_split = height.cross_fitted(split[1], stack)
            x_ss = (
                height.cross_fitted(
                    split[1], np.stack([fixed_split[h] for h in sorted(fixed_split)])
                )
                if fixed_split
                else None
            )
            rows += 1
            for i, metric in enumerate(height.METRICS):
                line = (
                    f"{fam:<10} {floor:>2} {metric:<9} {np.median(even[0]):>6g} "
                    f"{np.median(split[0]):>7g} {np.median(even[1][:, i]):>9.2e} "
                    f"{np.median(split[1][:, i]):>9.2e} {x_even[i]:>9.2f} {x_split[i]:>10.2f}"
                )
                hits = [x_even[i] <= height.TARGET, x_split[i] <= height.TARGET]
                if x_ss is not None:
                    line += f" {x_ss[i]:>11.2f}"
                    hits.append(x_ss[i] <= height.TARGET)
                for j, hit in enumerate(hits):
                    within[j] += hit
                    per_metric[j, i] += hit
                print(line, flush=True)
    names = ["auto even vs fixed even", "auto split vs fixed even", "auto split vs fixed split"]
    for j, name in enumerate(names[: 3 if args.split_fixed else 2]):
        m = per_metric[j]
        print(
            f"{name}: {within[j]} of {rows * len(height.METRICS)} within {height.TARGET}x "
            f"(AUC {m[0]}/{rows}, AP {m[1]}/{rows}, P/R/A {m[2:].sum()}/{3 * rows})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
