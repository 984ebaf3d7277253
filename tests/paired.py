"""Paired scores of two correlated models on the same examples, the data `compare` is tested
and benchmarked on (benchmarks/compare.py imports it too).

Each example has a label and two logits sharing most of their noise, so the two models rank
alike and err on the same examples, as a retrained model and its predecessor do:

    baseline  = μ·y + e₁ − m,   candidate = (μ + shift)·y + ρ·e₁ + √(1 − ρ²)·e₂ − m

with y ∈ {0, 1}, e₁, e₂ ~ N(0, 1) independent, m the offset that puts the scores' middle near
the rare class, and the logits squashed to [0, 1]. `shift` > 0 makes a better candidate, < 0 a
worse one; `ties` rounds both scores to a grid of 0.05 (many exact ties, within and across the
models).
"""

from __future__ import annotations

import numpy as np

KINDS = ("worse", "equal", "better", "ties")
"""Scenarios of the tests and the benchmark: a candidate slightly worse, equal in distribution,
slightly better, and a worse one on tied (rounded) scores."""

SHIFTS = {"worse": -0.25, "equal": 0.0, "better": 0.25, "ties": -0.25}


def paired_scores(
    n: int,
    rng: np.random.Generator,
    *,
    shift: float = 0.0,
    positives: float = 0.02,
    rho: float = 0.8,
    ties: bool = False,
    separation: float = 2.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels as bool, baseline scores, candidate scores), each of shape (n,), scores in [0, 1].

    The labels are Bernoulli(`positives`); `separation` is the baseline's μ (its AUC is
    Φ(μ/√2) ≈ 0.92 at μ = 2), the candidate's is μ + `shift`."""
    y = rng.random(n) < positives
    e1 = rng.standard_normal(n)
    e2 = rng.standard_normal(n)
    offset = 2.5
    base = separation * y + e1 - offset
    cand = (separation + shift) * y + rho * e1 + np.sqrt(1.0 - rho * rho) * e2 - offset
    sb, sc = 1.0 / (1.0 + np.exp(-base)), 1.0 / (1.0 + np.exp(-cand))
    if ties:
        sb, sc = np.round(sb * 20) / 20, np.round(sc * 20) / 20
    return y, sb, sc


def scenario(kind: str, n: int, rng: np.random.Generator, **options):
    """`paired_scores` for one of KINDS."""
    return paired_scores(n, rng, shift=SHIFTS[kind], ties=kind == "ties", **options)


def _logit(s: np.ndarray) -> np.ndarray:
    s = np.clip(s, 1e-12, 1 - 1e-12)
    return np.log(s) - np.log1p(-s)


def same_auc(baseline: np.ndarray) -> np.ndarray:
    """A candidate whose AUC equals the baseline's exactly: a strictly increasing transform of
    its scores (the same order, ties kept), read on other cells of the release."""
    return 1.0 / (1.0 + np.exp(-0.8 * _logit(baseline)))


def auc_drop(y: np.ndarray, baseline: np.ndarray, drop: float) -> np.ndarray:
    """A candidate whose exact AUC is the baseline's less `drop` (to within 1/(P·N), the AUC's
    step): the positives' logits lowered by the shift s that bisection finds."""
    from sklearn.metrics import roc_auc_score

    z = _logit(baseline)
    target = roc_auc_score(y, baseline) - drop
    lo, hi = 0.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if roc_auc_score(y, 1.0 / (1.0 + np.exp(-(z - mid * y)))) > target:
            lo = mid
        else:
            hi = mid
    return 1.0 / (1.0 + np.exp(-(z - hi * y)))
