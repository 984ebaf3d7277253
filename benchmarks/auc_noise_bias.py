"""Is an AUC row's low coverage a bias, or the luck of its seeds? The estimate's error split,
release by release, into what the noise did and what the leaves' reading did (issue 25).

For one `hard.py` family and DP model, R releases at seeds S … S + R − 1 of one data draw (as
`hard.py` runs a DP setting; seeds 0 … 199 are its `--quick --dp-releases 200` row). Each
release's error, estimate − truth, is split on the same release at its own (auto) height h:

- noise part: raw(release leaves) − raw(exact leaves at h), raw the ½-counting AUC
  (`auc_from_buckets`) that the estimate is; the release noise alone, paired;
- reading part: raw(exact leaves at h) − truth, fixed for the data draw and the height: where
  the truth sits against the ½-counting of its own leaves (the range then covers it or not);
- fresh part: raw(exact leaves + the release's own fresh noise draws, `noise_draws`) −
  raw(exact leaves), over `--fresh` draws per release: the same noise law, a larger sample.

Each mean comes with its standard error (sd/√k). A noise part several standard errors from 0
while the fresh part is at 0 would be a bias of the release's noise or of the decoding; a noise
part at 0 and a coverage short of 0.95 only at some seeds is the seeds' luck; a reading part
beyond the range (`range` is [low, high] − raw of the release, medians) is a bias of the
reading. Coverage is also given per block of 200 seeds, to show how a 200-release row scatters.

    .venv/bin/python benchmarks/auc_noise_bias.py --family tworanges --model distdp
    .venv/bin/python benchmarks/auc_noise_bias.py --family lowrange --model localdp \
        --releases 1000 --first-seed 200
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from hard import EPSILON, THRESHOLDS, build

from fedeval.api.evaluate import evaluate_data
from fedeval.estimate.metrics import auc_from_buckets
from fedeval.privacy.decode import noise_draws

BLOCK = 200


def mean_se(x: np.ndarray) -> str:
    return f"{x.mean():+.2e} ± {x.std() / np.sqrt(max(x.size, 1)):.1e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="tworanges")
    ap.add_argument("--model", default="distdp", choices=("distdp", "localdp"))
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--releases", type=int, default=600)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--fresh", type=int, default=50, help="fresh noise draws per release")
    args = ap.parse_args()
    thresholds = list(THRESHOLDS[args.family])
    data = build(args.family, args.rows, 0)
    kw = {"model": args.model, "epsilon": EPSILON[args.model], "thresholds": thresholds}
    if args.model == "distdp":
        kw["level_split"] = "auto"
    exact: dict[int, np.ndarray] = {}
    rows = []
    t0 = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.releases):
        ev = evaluate_data(data, seed=seed, **kw)
        h = ev.config.height
        if h not in exact:
            fed = evaluate_data(data, seed=0, model="federated", height=h, thresholds=thresholds)
            exact[h] = fed.histogram.leaves
        x = exact[h]
        raw_exact = float(auc_from_buckets(x[0], x[1]))
        leaves = ev.histogram.leaves
        raw = float(auc_from_buckets(leaves[0], leaves[1]))
        draws = noise_draws(ev.histogram, args.fresh, np.random.default_rng(seed))
        fresh = float(np.mean(auc_from_buckets(x[0] + draws[:, 0], x[1] + draws[:, 1])))
        a, p = ev.auc, ev.parts.auc
        lo, hi = a.ci95
        parts = (a.estimate - a.exact, raw - raw_exact, raw_exact - a.exact, fresh - raw_exact)
        reading = (p.low - raw, p.high - raw, p.sd)
        rows.append((h, *parts, *reading, float(lo <= a.exact <= hi), float(a.exact > hi)))
    r = np.array(rows)
    print(
        f"{args.family} · {args.model}: {args.releases} releases, seeds {args.first_seed} … "
        f"{args.first_seed + args.releases - 1}, {args.rows:,} rows "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    for h in sorted(exact):
        v = r[r[:, 0] == h]
        covered, above = v[:, 8], v[:, 9]
        print(
            f"  h={h} k={len(v)} cov {covered.mean():.3f} (truth above {int(above.sum())}, "
            f"below {int(covered.size - covered.sum() - above.sum())}) | err {mean_se(v[:, 1])} "
            f"sd {v[:, 1].std():.2e}, interval sd {np.median(v[:, 7]):.2e}\n"
            f"       noise part {mean_se(v[:, 2])} | fresh part {mean_se(v[:, 4])} "
            f"(x{args.fresh} draws) | reading part {v[0, 3]:+.2e}, range "
            f"[{np.median(v[:, 5]):+.2e}, {np.median(v[:, 6]):+.2e}]"
        )
    blocks = [f"{b[:, 8].mean():.3f}" for b in np.array_split(r, max(len(r) // BLOCK, 1))]
    print(f"  coverage per block of ~{BLOCK} seeds: {' '.join(blocks)}")


if __name__ == "__main__":
    main()
