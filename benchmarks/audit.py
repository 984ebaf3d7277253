"""The privacy audit table: for every mechanism, the claimed ε against the largest ε an adversary
could demonstrate from T runs per neighbouring dataset, through the deployed encode → mask →
unmask → release path (`fedeval.audit`), and the per-cohort noise check.

    .venv/bin/python benchmarks/audit.py            # T = 20,000 per side (about 10 minutes)
    .venv/bin/python benchmarks/audit.py --trials 2000

ε_lb is a 99.9% lower confidence bound (Clopper–Pearson, Bonferroni over the events scanned);
the audit passes when ε_lb ≤ ε. The last rows run the same audit on deliberately broken
mechanisms, which it must catch (ε_lb > ε).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from fedeval import audit
from fedeval.privacy import distdp, localdp, probe
from fedeval.privacy.mechanism import Mechanism


def row(name: str, claimed: float, bound: audit.EpsilonBound, seconds: float, expect_pass: bool):
    passed = bound.epsilon_lb <= claimed
    verdict = (
        ("PASS" if passed else "FAIL") if expect_pass else ("caught" if not passed else "MISSED")
    )
    return (
        f"{name:<62} {claimed:>5g} {bound.epsilon_lb:>8.3f} {bound.trials // 2:>8,} "
        f"{seconds:>6.0f}s  {verdict:<7} {bound.event}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20_000, help="runs per neighbouring dataset")
    ap.add_argument("--epsilon", type=float, default=1.0)
    args = ap.parse_args()
    rng = np.random.default_rng()
    print(f"{'mechanism':<62} {'ε':>5} {'ε_lb':>8} {'T/side':>8} {'time':>7}  verdict event")
    ok = True
    # distdp's default `--level-split auto` (f = the thresholds' alignment level, s = 0.8, the
    # AP's leaves bounded at 1.25×: `fedeval.core.params.level_split_of`) at f = 2, where the
    # probe's floor h = 4 releases levels on both sides of f.
    split = (2, 0.8, 1.25)
    default_splits = [
        audit.Scenario("distdp", "add-remove", epsilon=args.epsilon, height="auto", split=split),
        audit.Scenario("distdp", "replace", epsilon=args.epsilon, height="auto", split=split),
        audit.Scenario(
            "distdp", "add-remove", "client", 2, epsilon=args.epsilon, height="auto", split=split
        ),
    ]
    for sc in audit.all_scenarios(args.epsilon) + default_splits:
        t0 = time.perf_counter()
        b = audit.audit_epsilon(sc, args.trials, rng)
        ok &= b.epsilon_lb <= sc.epsilon
        print(row(sc.name, sc.epsilon, b, time.perf_counter() - t0, True), flush=True)

    # Controls: the audit must catch these (each patches the mechanism, then restores it).
    eps = args.epsilon
    halved_alpha = lambda c: math.exp(-c.epsilon / (Mechanism(c).sensitivity / 2))  # noqa: E731
    controls = [
        ("BROKEN distdp: Δ halved", audit.Scenario("distdp", "add-remove", epsilon=eps),
         distdp, "alpha", halved_alpha),
        ("BROKEN distdp replace: add-remove Δ", audit.Scenario("distdp", "replace", epsilon=eps),
         distdp, "alpha", halved_alpha),
        ("BROKEN localdp client: ε per report",
         audit.Scenario("localdp", "replace", "client", 2, epsilon=eps),
         localdp, "report_epsilon", lambda c: c.epsilon),
    ]  # fmt: skip

    # Two-phase `auto`: a probe with no noise (exact totals, charged s·ε); a probe noised for
    # the whole ε but charged s·ε (real ε = (1 + (1 − s))·ε: only T = 20,000 sees it); bare
    # (unrandomised) localdp probe reports.
    def bare(labels, cells, level, real, config, rng):
        bits = np.zeros((len(labels), 2 << level), bool)
        bits[np.arange(len(labels)), probe.probe_index(labels, cells, level)] = real
        return bits

    def full_epsilon(c):
        return math.exp(-c.epsilon / Mechanism(c).probe_sensitivity)

    honest_alphas = distdp.level_alphas

    def finer_levels_under_noised(c):
        """Each level finer than f noised as if it had ten times its share of ε."""
        out = honest_alphas(c)
        if not c.level_split:
            return out
        return tuple(a**10 if k > c.split_level else a for a, k in zip(out, c.levels, strict=True))

    controls += [
        ("BROKEN distdp auto: probe without noise",
         audit.Scenario("distdp", "add-remove", epsilon=eps, height="auto"),
         probe, "_alpha", lambda c: 1e-12),
        ("BROKEN distdp auto: probe at ε, charged s·ε",
         audit.Scenario("distdp", "add-remove", epsilon=eps, height="auto"),
         probe, "_alpha", full_epsilon),
        ("BROKEN distdp split: finer levels noised at 10× their share",
         default_splits[0], distdp, "level_alphas", finer_levels_under_noised),
        ("BROKEN localdp auto: bare probe reports",
         audit.Scenario("localdp", "replace", epsilon=eps, height="auto"),
         probe, "client_bits_localdp", bare),
    ]  # fmt: skip
    for name, sc, module, attr, broken in controls:
        original = getattr(module, attr)
        setattr(module, attr, broken)
        try:
            t0 = time.perf_counter()
            b = audit.audit_epsilon(sc, args.trials, rng)
        finally:
            setattr(module, attr, original)
        ok &= b.epsilon_lb > sc.epsilon
        print(row(name, sc.epsilon, b, time.perf_counter() - t0, False), flush=True)

    print()
    one_phase = [
        s for s in audit.all_scenarios(args.epsilon) if s.model == "distdp" and not s.two_phase
    ]
    # Each honest cohort's variance must hold, and its counts be uncorrelated: 2 per scenario
    # plus the colluders' 2, so each interval is taken at 1 − 0.001/that many (Bonferroni): the
    # table as a whole then raises a false alarm at most 0.1% of the time, where 99.9% per row
    # gave about 2% (one honest row 3.3 sd out in about one run in fifty).
    honest = 2 * len(one_phase) + 2
    conf = 1.0 - 0.001 / honest
    head = f"{'per-cohort noise (2 cohorts)':<44} {'stated':>8} {'cohort':>7}"
    print(f"{head} {'interval of var*':>22} {'max |r| < bound*':>16} verdict")
    for sc in one_phase:
        stated = Mechanism(sc.config()).noise_variance
        for i, noise in enumerate(audit.cohort_noise(sc, max(args.trials // 10, 200), rng)):
            lo, hi = audit.variance_interval(noise, conf)
            worst, bound = audit.correlation_bound(noise, conf)
            good = lo <= stated <= hi and worst < bound
            ok &= good
            verdict = "PASS" if good else "FAIL"
            print(
                f"{sc.name:<44} {stated:>8.3f} {i:>7} [{lo:>9.3f}, {hi:>9.3f}] "
                f"{worst:>7.3f} < {bound:.3f} {verdict}"
            )
            if not good:  # the evidence to read: each count's variance over the stated
                ratios = " ".join(f"{r:.3f}" for r in noise.var(axis=0, ddof=1) / stated)
                print(f"    each count's variance / stated: {ratios}")
    # Control: shares sized for every client of the run rather than the cohort (as before).
    sc = audit.Scenario("distdp", "add-remove", epsilon=args.epsilon)
    stated = Mechanism(sc.config()).noise_variance
    original = distdp.client_reports

    def for_population(rows, config, cohort_size, rng):
        return original(rows, config, sc.clients, rng)

    distdp.client_reports = for_population
    try:
        noise = audit.cohort_noise(sc, max(args.trials // 10, 200), rng)
    finally:
        distdp.client_reports = original
    intervals = [audit.variance_interval(x, conf) for x in noise]
    caught = any(not lo <= stated <= hi for lo, hi in intervals)
    ok &= caught
    shown = ", ".join(f"[{lo:.3f}, {hi:.3f}]" for lo, hi in intervals)
    name = "BROKEN distdp: shares sized for the run"
    print(f"{name:<44} {stated:>8.3f}   cohorts {shown} {'caught' if caught else 'MISSED'}")
    # Collusion: what a server holding 3 clients' shares of each cohort is left with, with
    # shares sized for it (--colluders 3) and, as the control, without (Pólya(1/m) shares).
    for t_knob, expect in ((3, True), (0, False)):
        sc = audit.Scenario("distdp", "add-remove", epsilon=args.epsilon, colluders=t_knob)
        stated = Mechanism(sc.config()).noise_variance
        noise = audit.honest_noise(sc, max(args.trials // 10, 200), rng, colluders=3)
        intervals = [audit.variance_interval(x, conf) for x in noise]
        holds = all(lo <= stated <= hi for lo, hi in intervals)
        ok &= holds == expect
        shown = ", ".join(f"[{lo:.3f}, {hi:.3f}]" for lo, hi in intervals)
        name = (
            "distdp, 3 colluders, --colluders 3"
            if t_knob
            else "BROKEN distdp: 3 colluders, no --colluders"
        )
        verdict = ("PASS" if holds else "FAIL") if expect else ("MISSED" if holds else "caught")
        print(f"{name:<44} {stated:>8.3f}   cohorts {shown} {verdict}")
    print(f"* each at {conf:.5%}: the {honest} honest intervals hold jointly at 99.9%")
    print()
    print("all checks as expected" if ok else "AUDIT FAILED")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
