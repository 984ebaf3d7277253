"""Can reading each metric at its own level of a distdp tree bring `--height auto` within 1.25×
of the best fixed height? (Post-processing of one release: no ε.)

Under distdp every level 1..h of the tree is released, and the consistent leaves summed to
level k are the least-squares estimate of level k's counts; so the AUC and the AP can be read
from any level k ≤ h of the same release (`fedeval.core.hierarchy.coarsen`), trading the
leaves' noise for level k's discretisation. This script measures whether that helps, for the
AUC and the AP (P/R/A are read at their thresholds' edges already):

- `leaves`: the evaluation's own estimate (level h);
- `best k`: the one level read on every release of a family that does best, chosen on half the
  draws and scored on the other half (each way round, as `height.cross_fitted`): the most any
  rule that reads one level per family could reach, with hindsight no release has;
- `lepski`: the coarsest level k whose value agrees with every finer level's within z sds of
  their difference's noise (Lepski's rule; Lepski, Mammen & Spokoiny, Ann. Statist. 1997),
  z = Z95: the level read where no finer level shows a bias beyond the noise;
- `risk`: the level of least estimated squared error, bias² read as (V_k − V_h)² less the
  variance of that difference (unbiased for the squared bias), plus V_k's noise variance;
- `descent`: not one level but each region at the finest level whose counts are informative
  there (`fedeval.estimate.descent`, the issue's adaptive descent in the spirit of PrivTree):
  what the evaluation's AP reads under distdp since this script measured it (the `leaves`
  column's AP is the read before).

Each rule's noise is that of the release itself: NOISE_DRAWS fresh draws of its noise through
the consistency step (`fedeval.privacy.decode.noise_draws`, a fixed generator, so the level is
a function of the release alone). The ratio is each read's median |error| over the best fixed
height's (even tree, cross-fitted, `height.cross_fitted`), on `benchmarks/height.py`'s quick
families (distdp ε = 1, n = 100k, tiny 2k), R draws (seeds 1000 + r, as height.py and
level_split.py; the fixed heights from `--cache`, height.py's layout, computed where missing).

    .venv/bin/python benchmarks/level_read.py --draws 40 --cache DIR [--level-split 4:0.8]

Measured (--draws 40, the 12 quick families, the release of `--level-split auto`, the default;
the descent as `fedeval.estimate.descent` reads it):

    family       area    h       leaves       best k       lepski         risk      descent
    smooth       AUC     7   1.17 (k  7)   1.17 (k  7)   1.33 (k  6)   1.33 (k  6)   1.17 (k  7)
    smooth       AP      7   1.37 (k  7)   1.26 (k  6)   1.33 (k  6)   1.40 (k  6)   1.37 (k  7)
    pointmass    AUC     7   1.73 (k  7)   1.30 (k  5)   1.62 (k  6)   1.60 (k  6)   1.73 (k  7)
    pointmass    AP      7   0.92 (k  7)   0.39 (k  3)   1.06 (k  5)   0.99 (k  4)   0.95 (k  7)
    rare         AUC     4   0.75 (k  4)   0.73 (k  4)   0.68 (k  4)   0.79 (k  4)   0.75 (k  4)
    rare         AP      4   1.66 (k  4)   1.71 (k  5)   1.66 (k  4)   1.66 (k  4)   1.66 (k  4)
    grid         AUC     7   1.27 (k  7)   1.26 (k  7)   0.97 (k  6)   1.02 (k  6)   1.27 (k  7)
    grid         AP      7   2.05 (k  7)   1.16 (k  4)   1.84 (k  6)   1.95 (k  6)   1.98 (k  7)
    tree         AUC     7   1.23 (k  7)   1.49 (k  8)   1.17 (k  7)   1.23 (k  7)   1.23 (k  7)
    tree         AP      7   2.42 (k  7)   1.04 (k  4)   2.43 (k  7)   2.42 (k  7)   2.43 (k  7)
    squeezed     AUC     9   0.58 (k  9)   0.58 (k  9)   0.58 (k  9)   0.58 (k  9)   0.58 (k  9)
    squeezed     AP      9   1.31 (k  9)   1.31 (k  9)   1.38 (k  9)   1.35 (k  9)   1.06 (k  9)
    tiny         AUC     4   1.40 (k  4)   1.40 (k  4)   1.40 (k  4)   1.40 (k  4)   1.40 (k  4)
    tiny         AP      4   1.34 (k  4)   1.34 (k  4)   1.56 (k  4)   1.35 (k  4)   1.34 (k  4)
    ultrarare    AUC     4   1.00 (k  4)   1.00 (k  3)   0.99 (k  2)   1.00 (k3.5)   1.00 (k  4)
    ultrarare    AP      4   0.82 (k  4)   0.82 (k  4)   1.02 (k  4)   0.98 (k  4)   0.82 (k  4)
    clipped      AUC     6   1.38 (k  6)   1.38 (k  6)   1.38 (k  6)   1.38 (k  6)   1.38 (k  6)
    clipped      AP      6   2.60 (k  6)   2.60 (k  6)   2.62 (k  6)   2.60 (k  6)   2.60 (k  6)
    bimodal      AUC     7   0.81 (k  7)   0.81 (k  7)   0.81 (k  7)   0.81 (k  7)   0.81 (k  7)
    bimodal      AP      7   1.19 (k  7)   1.09 (k  6)   1.16 (k  6)   1.06 (k  6)   1.19 (k  7)
    onevalue     AUC    11   0.94 (k 11)   0.94 (k 11)   0.94 (k 11)   0.94 (k 11)   0.94 (k 11)
    onevalue     AP     11   2.59 (k 11)   1.00 (k  4)   2.59 (k 11)   2.59 (k 11)   2.59 (k 11)
    ultrarare-2m AUC     4   0.40 (k  4)   0.40 (k  3)   0.53 (k  2)   0.40 (k  3)   0.40 (k  4)
    ultrarare-2m AP      4   0.77 (k  4)   0.77 (k  4)   0.92 (k  3)   0.91 (k  4)   0.80 (k  4)
    leaves: within 1.25x on 12 of 24 (AUC 8/12, AP 4/12)
    best k: within 1.25x on 14 of 24 (AUC 7/12, AP 7/12)
    lepski: within 1.25x on 12 of 24 (AUC 8/12, AP 4/12)
    risk: within 1.25x on 12 of 24 (AUC 8/12, AP 4/12)
    descent: within 1.25x on 13 of 24 (AUC 8/12, AP 5/12)
    the leaves' AUC and the descent's AP against the evaluation's: largest |difference| 0.0e+00

Reading one level for the whole AUC or AP does not raise the count: Lepski's rule and the
least-risk rule each gain one cell and lose one (grid's AUC 1.27 → 0.97, level 6; smooth's
1.17 → 1.33, level 6, a bias under the noise of the difference that is still there). On smooth
and squeezed scores and a clipped class the coarse levels' discretisation exceeds the noise
saved, so the rules stay at the leaves or one level up. The AP's best single level is coarse
where the scores are tied (grid, tree, onevalue: level 4, 1.0–1.16× against 2.0–2.6× at the
leaves; pointmass level 3), but there the levels' values differ by more than their noise, and
both rules read the difference as a bias and keep the fine levels: a release cannot tell which
level's discretisation of tied scores is nearer the truth (ties against a narrow peak,
`tests/test_coverage_limits.py`), so no rule from the release picks it. The descent reads the
empty regions of squeezed scores as a few coarse cells instead of hundreds of leaves whose
clipped noise the AP counts as false positives: squeezed AP 1.31 → 1.06, nothing else moved
beyond the draws' noise (13 of 24 against 12); the evaluation's AP reads it since (last line:
the leaves' AUC and the descent's AP are the evaluation's, difference 0). A first version of
the descent that split a node only where both children held 2 sds read squeezed scores, whose
every split leaves one child empty, at the root (AP 7.8×): the test is the node's own count.

Two other ways to the same end, measured with `benchmarks/level_split.py` (40 draws, the same
families): releasing the split at s = 0.842 = 1/(1.25·(1 − PROBE_SHARE)) with no bound for the
AP (the P/R/A count's sd then within 1.25× of the height-f tree's, the probe's 5% of ε
included, which s = 0.8 is not: 1/(0.95·0.8) = 1.32) reaches 39 of 60 (AUC 7, AP 3, P/R/A 29)
against the default's 29 (AUC 8, AP 4, P/R/A 17), but on smooth scores at 1M rows (4 seeds,
median) it takes the AP's interval from 2.46e-4 to 4.37e-4 wide (1.78×) and its error from
2.9e-5 to 7.4e-5; and choosing the AP's bound per release from the probe's predicted errors
(bound or none, the least geometric mean of the ratios to each metric's best) kept the bound
on every family: the probe sees the AP's error as noise (tree: predicted bias 2.1e-4 against a
measured error of 5e-3), so it changed nothing (29 of 60).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import hard
import height
import level_split
import numpy as np

from fedeval.api.evaluate import evaluate_data
from fedeval.core.config import PrivacyModel
from fedeval.core.hierarchy import coarsen
from fedeval.core.params import AUTO_MAX_HEIGHT
from fedeval.estimate.descent import descent_read, spread
from fedeval.estimate.metrics import auc_from_buckets, clip_unit
from fedeval.estimate.roc_pr import leaf_ap_rows, leaf_tails
from fedeval.estimate.uncertainty import Z95
from fedeval.privacy.decode import noise_draws

NOISE_DRAWS = 64
"""Fresh noise draws per release for the rules' sds (a sd from 64 draws is known to ±9%)."""
READS = ("leaves", "best k", "lepski", "risk", "descent")
AREAS = ("AUC", "AP")


def areas(leaves: np.ndarray) -> np.ndarray:
    """(..., 2): the AUC and the AP of consistent leaves (..., 2, L), as the evaluation reads
    them from its leaves (`fedeval.api.evaluate.estimate_auc`: pairs in a cell counted ½,
    clipped to [0, 1]; `fedeval.estimate.roc_pr`: the AP's integral rule)."""
    flat = leaves.reshape(-1, *leaves.shape[-2:])
    fp, tp = leaf_tails(flat)
    auc = clip_unit(auc_from_buckets(flat[:, 0], flat[:, 1]))
    out = np.stack([auc, leaf_ap_rows(fp, tp, "integral")], axis=-1)
    return out.reshape(*leaves.shape[:-2], 2)


def lepski(values: np.ndarray, draws: np.ndarray) -> int:
    """Index of the coarsest level whose value agrees with every finer one's within Z95 sds of
    their difference (values (K,), draws (K, D): the same levels on re-noised releases)."""
    for i in range(len(values)):
        sd = np.std(draws[i] - draws[i + 1 :], axis=-1)
        if np.all(np.abs(values[i] - values[i + 1 :]) <= Z95 * sd):
            return i
    return len(values) - 1


def least_risk(values: np.ndarray, draws: np.ndarray) -> int:
    """Index of the level of least estimated squared error: max(0, (V_k − V_h)² − var(V_k −
    V_h)) + var(V_k)."""
    bias2 = np.square(values - values[-1]) - np.var(draws - draws[-1], axis=-1)
    return int(np.argmin(np.maximum(bias2, 0.0) + np.var(draws, axis=-1)))


def run(task):
    """(family, floor, heights used (R,), |error| per level (R, K, 2), |error| of the rules'
    reads (R, 3, 2: lepski, risk, descent), their levels (R, 3, 2; the descent's: h),
    {h: fixed even errors (R, 5)}, largest difference between the leaves' read and the
    evaluation's own estimate)."""
    family, n, draws, cache, setting = task
    t0 = time.perf_counter()
    data = hard.build(family, n, 0)
    kw = {"model": "distdp", "epsilon": 1.0, "thresholds": list(hard.THRESHOLDS[family])}
    floor = data.axis.auto_floor(data.resolution)
    top = min(AUTO_MAX_HEIGHT[PrivacyModel.DISTDP], hard.RESOLUTION)
    levels = np.arange(2, top + 1)
    used, by_level, ruled, chosen, worst = [], [], [], [], 0.0
    for r in range(draws):
        ev = evaluate_data(
            data, height="auto", seed=1000 + r, ci_draws=0, level_split=setting, **kw
        )
        h = ev.config.height
        hist = ev.run.histogram
        truth = np.array([ev.auc.exact, ev.curves.average_precision.exact])
        ks = np.minimum(levels, h)
        own = np.arange(2, h + 1)
        values = np.stack([areas(coarsen(hist.leaves, int(k))) for k in own])  # (K, 2)
        fresh = noise_draws(hist, NOISE_DRAWS, np.random.default_rng(0))
        assert fresh is not None
        noisy = np.stack([areas(coarsen(hist.leaves + fresh, int(k))) for k in own])  # (K, D, 2)
        err = np.abs(values - truth)
        by_level.append(err[ks - 2])
        picks = [
            [rule(values[:, m], noisy[:, :, m]) for m in range(2)] for rule in (lepski, least_risk)
        ]
        starts = descent_read(hist.leaves, hist.level_variances, hist.config.levels)
        read = hist.leaves if starts is None else spread(hist.leaves, starts)
        adaptive = np.abs(areas(read) - truth)
        # The evaluation reads the AUC at the leaves and the AP by the descent.
        own_read = np.array([err[-1, 0], adaptive[1]])
        worst = max(worst, float(np.max(np.abs(own_read - height.errors(ev)[:2]))))
        ruled.append([[err[p, m] for m, p in enumerate(pick)] for pick in picks] + [list(adaptive)])
        chosen.append([[own[p] for p in pick] for pick in picks] + [[h, h]])
        used.append(h)
    key = (family, n, "distdp", draws, cache)
    fixed = {
        h: height.fixed(h, lambda h=h: level_split._errors(data, h, draws, kw, 0.0, floor)[1], key)
        for h in range(max(2, floor), top + 1)
    }
    print(f"  {family}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return (
        family, floor, np.asarray(used), np.asarray(by_level), np.asarray(ruled),
        np.asarray(chosen), fixed, worst,
    )  # fmt: skip


def best_level(by_level: np.ndarray, fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per area, the one level read on every release chosen on half the draws and scored on the
    other half against the best fixed height chosen there too (geometric mean of both ways
    round, as `height.cross_fitted`), and the level chosen on all draws. `by_level` (R, K, 2),
    `fixed` (H, R, 2)."""
    halves = (np.arange(by_level.shape[0]) % 2 == 0, np.arange(by_level.shape[0]) % 2 == 1)
    logs = []
    for pick, score in (halves, halves[::-1]):
        k = np.argmin(np.median(by_level[pick], axis=0), axis=0)  # (2,)
        h = np.argmin(np.median(fixed[:, pick], axis=1), axis=0)
        mine = np.median(by_level[score], axis=0)[k, [0, 1]]
        ref = np.median(fixed[:, score], axis=1)[h, [0, 1]]
        logs.append(np.log([height.ratio(a, b) for a, b in zip(mine, ref, strict=True)]))
    return np.exp(np.mean(logs, axis=0)), np.argmin(np.median(by_level, axis=0), axis=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument(
        "--families", nargs="+", choices=hard.FAMILIES, default=list(height.QUICK_FAMILIES)
    )
    ap.add_argument("--cache", help="height.py's folder of the fixed heights' errors")
    ap.add_argument("--level-split", default="auto", help="the release's --level-split")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    sizes = dict.fromkeys(hard.FAMILIES, 100_000) | hard.SMALL_ROWS
    tasks = [(f, sizes[f], args.draws, args.cache, args.level_split) for f in args.families]
    print(f"distdp ε = 1, --level-split {args.level_split}, {args.draws} draws; xfit: median")
    print("|error| of each read over the best fixed even height's, cross-fitted (height.py);")
    print("k: the level read (median over the draws; best k: chosen on all draws)")
    print(f"{'family':<12} {'area':<4} {'h':>4} " + " ".join(f"{r:>12}" for r in READS))
    within = np.zeros((len(READS), 2), int)
    rows, worst = 0, 0.0
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for fam, _f, used, by_level, ruled, chosen, fixed, w in pool.map(run, tasks):
            worst = max(worst, w)
            stack = np.stack([fixed[h][:, :2] for h in sorted(fixed)])
            leaves = height.cross_fitted(by_level[:, -1], stack)
            oracle, k_best = best_level(by_level, stack)
            rules = [height.cross_fitted(ruled[:, j], stack) for j in range(3)]
            rows += 1
            for m, area in enumerate(AREAS):
                x = [leaves[m], oracle[m], rules[0][m], rules[1][m], rules[2][m]]
                k = [np.median(used), 2 + k_best[m], *np.median(chosen[:, :, m], axis=0)]
                within[:, m] += np.asarray(x) <= height.TARGET
                cells = " ".join(f"{xi:>6.2f} (k{ki:>3g})" for xi, ki in zip(x, k, strict=True))
                print(f"{fam:<12} {area:<4} {np.median(used):>4g} {cells}", flush=True)
    for i, name in enumerate(READS):
        print(
            f"{name}: within {height.TARGET}x on {within[i].sum()} of {2 * rows} "
            f"(AUC {within[i, 0]}/{rows}, AP {within[i, 1]}/{rows})"
        )
    print(
        f"the leaves' AUC and the descent's AP against the evaluation's: largest "
        f"|difference| {worst:.1e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
