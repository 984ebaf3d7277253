"""Coverage of the 95% intervals on random data-generating processes: shapes nobody wrote down.

`benchmarks/hard.py`'s families were each added after it had failed once; this sweep looks for
the next one first. A seeded generator draws a recipe per shape from these ingredients, combined
at random:

- per-class scores: Beta(a, b) or logit-normal, with a random separation (AUC from ≈ 0.5 to 1,
  and inverted);
- squeezing into a sub-range [lo, lo + w], w = 10^U(−3, 0), anywhere in [0, 1] (touching 0 or 1
  at times);
- rounding to a grid of 10^−k (k = 1 … 4), or onto a few dozen "tree leaf" values;
- point masses: 1–5 of them holding 5–60% of the rows, some on a declared threshold, each with
  its own label rate;
- clipping at exactly 0 and 1;
- a positive rate 10^U(−3, −0.3), or above one half;
- n from 500 to 300k (most ≤ 100k);
- 5 thresholds at random: in the data's range, on a mass, just beside one, in an empty range.

Every shape prints as a one-line recipe (`Recipe.text`), which `--recipe` reads back, so a row
can be re-run, reduced (drop an ingredient, re-run) and confirmed with more releases. The sweep
runs each shape through `hard.run_setting` (its data read as `hard.build` reads a family's: the
thresholds declared, so they are cell edges) under federated (100 data draws), distdp ε = 1 unit
example and localdp ε = 5 (200 noise seeds on data draw 0), and distdp ε = 1 unit client (1,000
clients of Zipf-like sizes, L = 1000) on every third shape, all at auto height. One row per
(shape, model, metric) with hard.py's columns; flagged:

- LOW: coverage below 0.90 (3 sd below 0.95 at 200 intervals) or a threshold below 0.85;
- WIDE: median width above 0.5 where n ≥ 50,000 (an interval honest by saying nothing);
- NAN k: k intervals or estimates nan or missing, most often a precision whose exact value is
  undefined (no row at or above t); LOW then judges the coverage of the others.

    .venv/bin/python benchmarks/shapes.py --shapes 40                 # shapes 0 … 39
    .venv/bin/python benchmarks/shapes.py --first-shape 40 --shapes 20
    .venv/bin/python benchmarks/shapes.py --recipe "n=20000 pos=0.01 ..." --models distdp \
        --dp-releases 1000
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import hard

from fedeval.api.evaluate import threshold_axis
from fedeval.protocol.partition import assign_clients
from fedeval.tables.scored import scored_from_arrays

LOW = 0.90
LOW_THRESHOLD = 0.85
WIDE = 0.5
WIDE_N = 50_000


@dataclass(frozen=True)
class Recipe:
    """One data-generating process; `text` is its one-line form, `parse` reads it back."""

    n: int
    pos: float  # positive rate
    kind: str  # "beta" or "logit"
    neg: tuple[float, float]  # Beta (a, b) or logit-normal (mean, sd) of the negatives
    posp: tuple[float, float]  # the same for the positives
    invert: bool = False
    clip: tuple[float, float] | None = None  # s -> clip((s - c0) / (c1 - c0), 0, 1)
    squeeze: tuple[float, float] | None = None  # (lo, w): s -> lo + w·s
    rnd: str | None = None  # "g<k>" rounding to 10^-k, "l<m>" m leaf values
    masses: tuple[tuple[float, float, float], ...] = ()  # (value, share, label rate)
    thresholds: tuple[float, ...] = ()
    clients: bool = False
    seed: int = 0

    @property
    def text(self) -> str:
        parts = [f"n={self.n}", f"pos={self.pos:.4g}", f"seed={self.seed}"]
        parts.append(f"{self.kind}={_pair(self.neg)}/{_pair(self.posp)}")
        if self.invert:
            parts.append("invert")
        if self.clip:
            parts.append(f"clip={_pair(self.clip)}")
        if self.squeeze:
            parts.append(f"squeeze={_pair(self.squeeze)}")
        if self.rnd:
            parts.append(f"round={self.rnd}")
        if self.masses:
            parts.append("mass=" + ";".join(f"{v:.6g}:{s:.3g}:{r:.3g}" for v, s, r in self.masses))
        parts.append("thr=" + ",".join(f"{t:.6g}" for t in self.thresholds))
        if self.clients:
            parts.append("clients")
        return " ".join(parts)


def _pair(p: tuple[float, float]) -> str:
    return f"{p[0]:.4g},{p[1]:.4g}"


def parse(text: str) -> Recipe:
    """The recipe `Recipe.text` printed."""
    kw: dict = {}
    for tok in text.split():
        key, _, val = tok.partition("=")
        if key == "n":
            kw["n"] = int(float(val))
        elif key == "pos":
            kw["pos"] = float(val)
        elif key == "seed":
            kw["seed"] = int(val)
        elif key in ("beta", "logit"):
            a, b = val.split("/")
            kw["kind"], kw["neg"], kw["posp"] = key, _floats(a), _floats(b)
        elif key in ("invert", "clients"):
            kw[key] = True
        elif key in ("clip", "squeeze"):
            kw[key] = _floats(val)
        elif key == "round":
            kw["rnd"] = val
        elif key == "mass":
            kw["masses"] = tuple(tuple(float(x) for x in m.split(":")) for m in val.split(";") if m)
        elif key == "thr":
            kw["thresholds"] = tuple(float(x) for x in val.split(","))
        else:
            raise SystemExit(f"shapes.py: unknown recipe token {tok!r}")
    return Recipe(**kw)


def _floats(v: str) -> tuple[float, float]:
    a, b = v.split(",")
    return float(a), float(b)


def draw_recipe(index: int, master: int = 0) -> Recipe:
    """Shape `index` of the sweep (seeded by (master, index))."""
    rng = np.random.default_rng([master, 7919, index])
    n = round(10 ** rng.uniform(math.log10(500), 5.0))
    if rng.random() < 0.1:
        n = round(10 ** rng.uniform(5.0, math.log10(300_000)))
    pos = 10 ** rng.uniform(-3.0, -0.3) if rng.random() < 0.8 else rng.uniform(0.5, 0.98)
    pos = float(max(pos, 5.0 / n))  # a few positives expected at least
    if rng.random() < 0.5:
        kind = "beta"
        neg = (float(rng.uniform(0.3, 8.0)), float(rng.uniform(0.3, 8.0)))
        posp = (float(rng.uniform(0.3, 8.0)), float(rng.uniform(0.3, 8.0)))
    else:
        kind = "logit"
        m0, d = float(rng.uniform(-4.0, 2.0)), float(rng.uniform(-0.5, 4.0))
        neg = (m0, float(rng.uniform(0.3, 2.0)))
        posp = (m0 + d, float(rng.uniform(0.3, 2.0)))
    invert = bool(rng.random() < 0.15)
    clip = squeeze = None
    u = rng.random()
    if u < 0.15:
        clip = (float(rng.uniform(0.0, 0.25)), float(rng.uniform(0.75, 1.0)))
    elif u < 0.55:
        w = float(10 ** rng.uniform(-3.0, 0.0))
        v = rng.random()
        lo = 0.0 if v < 0.2 else (1.0 - w if v < 0.4 else float(rng.uniform(0.0, 1.0 - w)))
        squeeze = (lo, w)
    rnd = None
    u = rng.random()
    if u < 0.25:
        rnd = f"g{int(rng.integers(1, 5))}"
    elif u < 0.4:
        rnd = f"l{int(rng.integers(12, 61))}"
    lo, w = squeeze or (0.0, 1.0)
    masses: list[tuple[float, float, float]] = []
    if rng.random() < 0.35:
        k = int(rng.integers(1, 6))
        total = float(rng.uniform(0.05, 0.6))
        shares = total * rng.dirichlet(np.ones(k))
        for s in shares:
            v = float(lo + w * rng.random()) if rng.random() < 0.8 else float(rng.random())
            masses.append((round(v, 6), float(s), float(rng.random())))
    thr = set()
    while len(thr) < 5:
        u = rng.random()
        if u < 0.35:
            t = lo + w * rng.random()
        elif u < 0.55 and masses:
            v = masses[int(rng.integers(len(masses)))][0]
            side = rng.choice([-1.0, 0.0, 0.0, 1.0])
            t = v + side * 10 ** rng.uniform(-7.0, -3.0)
        elif u < 0.7 and (lo > 0.05 or lo + w < 0.95):
            gaps = [(0.0, lo)] if lo > 0.05 else []
            gaps += [(lo + w, 1.0)] if lo + w < 0.95 else []
            a, b = gaps[int(rng.integers(len(gaps)))]
            t = a + (b - a) * rng.random()
        else:
            t = rng.random()
        t = round(float(t), 6)
        if 1e-6 <= t <= 1.0 - 1e-6:
            thr.add(t)
    return Recipe(
        n=n,
        pos=round(pos, 6),
        kind=kind,
        neg=neg,
        posp=posp,
        invert=invert,
        clip=clip,
        squeeze=squeeze,
        rnd=rnd,
        masses=tuple(masses),
        thresholds=tuple(sorted(thr)),
        clients=index % 3 == 0,
        seed=index,
    )


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def generate(r: Recipe, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels as bool, scores in [0, 1]) of one draw of the recipe."""
    rng = np.random.default_rng([r.seed, 104729, seed])
    y = rng.random(n) < r.pos
    if r.kind == "beta":
        a = np.where(y, r.posp[0], r.neg[0])
        b = np.where(y, r.posp[1], r.neg[1])
        s = rng.beta(a, b)
    else:
        s = _sigmoid(rng.normal(np.where(y, r.posp[0], r.neg[0]), np.where(y, r.posp[1], r.neg[1])))
    if r.invert:
        s = 1.0 - s
    if r.clip:
        c0, c1 = r.clip
        s = np.clip((s - c0) / (c1 - c0), 0.0, 1.0)
    if r.rnd and r.rnd[0] == "l":  # a tree's leaves: each score onto the value of its bin
        m = int(r.rnd[1:])
        leaves = np.sort(np.random.default_rng([r.seed, 7]).choice(s[: min(n, 10_000)], m))
        edges = (leaves[1:] + leaves[:-1]) / 2
        s = leaves[np.searchsorted(edges, s)]
    if r.squeeze:
        lo, w = r.squeeze
        s = np.clip(lo + w * s, 0.0, 1.0)
    if r.rnd and r.rnd[0] == "g":
        s = np.clip(np.round(s, int(r.rnd[1:])), 0.0, 1.0)
    if r.masses:
        which = rng.choice(
            len(r.masses) + 1, n, p=[*(m[1] for m in r.masses), 1 - sum(m[1] for m in r.masses)]
        )
        for i, (v, _, rate) in enumerate(r.masses):
            on = which == i
            s[on] = v
            y[on] = rng.random(int(on.sum())) < rate
    return y, s


RECIPES: dict[str, Recipe] = {}


def build(family: str, n: int, seed: int):
    """`hard.build` for a generated shape (hard.run_setting calls it by name)."""
    r = RECIPES[family]
    y, s = generate(r, n, seed)
    if not y.any() or y.all():  # a draw with one class: flip one label so both exist
        y[0] = not y[0]
    clients = None
    if r.clients:
        rng = np.random.default_rng([r.seed, 31, seed])
        k = min(hard.N_CLIENTS, n // 4)  # a small draw on fewer clients (4 rows each at least)
        clients = assign_clients(y, k, "sizes", rng, zipf=hard.ZIPF)
    return scored_from_arrays(
        y.astype(np.int8),
        s,
        client_ids=clients,
        keep_scores=True,
        keep_examples=clients is not None,
        resolution=hard.RESOLUTION,
        axis=threshold_axis((0.0, 1.0), r.thresholds),
    )


def register(name: str, r: Recipe) -> None:
    RECIPES[name] = r
    hard.THRESHOLDS[name] = r.thresholds
    hard.build = build


def settings_of(name: str, r: Recipe, models, releases: int, dp_releases: int, first_seed: int):
    out = []
    for model in models:
        units = ["example"] + (["client"] if r.clients and model == "distdp" else [])
        for unit in units:
            out.append(
                hard.Setting(
                    name,
                    model,
                    unit,
                    r.n,
                    releases if model == "federated" else dp_releases,
                    1000,
                    200,
                    first_seed=first_seed,
                )
            )
    return out


def flags(st: hard.Setting, row: tuple) -> str:
    _metric, count, nans, cov, min_cov, _err, width, _band = row
    out = []
    if nans:  # an exact value that is undefined (precision with nothing above t) reads nan too
        out.append(f"NAN {nans}")
        if cov * count / max(count - nans, 1) < LOW:
            out.append("LOW")
    elif cov < LOW or min_cov < LOW_THRESHOLD:
        out.append("LOW")
    if width > WIDE and st.n >= WIDE_N:
        out.append("WIDE")
    return " ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", type=int, default=20, help="how many shapes (default 20)")
    ap.add_argument("--first-shape", type=int, default=0)
    ap.add_argument("--master", type=int, default=0, help="the sweep's seed")
    ap.add_argument("--recipe", nargs="+", default=[], help="run these recipes instead")
    ap.add_argument("--models", nargs="+", choices=hard.MODELS, default=list(hard.MODELS))
    ap.add_argument("--releases", type=int, default=100, help="federated data draws")
    ap.add_argument("--dp-releases", type=int, default=200, help="noise seeds per DP row")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--max-n", type=int, default=None, help="skip shapes above this n")
    ap.add_argument(
        "--units", nargs="+", choices=("example", "client"), default=["example", "client"]
    )
    ap.add_argument("--list", action="store_true", help="print the recipes and stop")
    args = ap.parse_args()

    if args.recipe:
        shapes = [(f"R{i}", parse(t)) for i, t in enumerate(args.recipe)]
    else:
        idx = range(args.first_shape, args.first_shape + args.shapes)
        shapes = [(f"S{i}", draw_recipe(i, args.master)) for i in idx]
    if args.max_n:
        shapes = [(k, r) for k, r in shapes if r.n <= args.max_n]
    for name, r in shapes:
        print(f"{name}: {r.text}", flush=True)
    if args.list:
        return
    header = (
        f"{'family':<10} {'model':<29} {'metric':<9} {'n':>5} {'nan':>4} {'coverage':>8} "
        f"{'band':>6} {'min cov':>7} {'med|err|':>9} {'med width':>9}  verdict"
    )
    print(header, flush=True)
    t0 = time.perf_counter()
    flagged = []
    for name, r in shapes:
        register(name, r)
        for st in settings_of(
            name, r, args.models, args.releases, args.dp_releases, args.first_seed
        ):
            if st.unit not in args.units:
                continue
            try:
                _, rows, _, _ = hard.run_setting(st)
            except Exception as exc:  # a crash on some shape is a finding too
                print(f"{name:<10} {st.label:<29} ERROR {type(exc).__name__}: {exc}", flush=True)
                flagged.append(f"{name} n={r.n:,} · {st.label}: ERROR {exc}")
                continue
            for row in rows:
                _, line = hard._judged(st, row)
                f = flags(st, row)
                print(line + (f"  <<{f}>>" if f else ""), flush=True)
                if f:
                    flagged.append(f"{name} n={r.n:,} · {st.label} · {row[0]}: {f}")
    print(f"total {time.perf_counter() - t0:.0f} s; {len(shapes)} shapes")
    print(f"{len(flagged)} rows flagged" + (":" if flagged else ""))
    for f in flagged:
        print("  " + f)


if __name__ == "__main__":
    main()
