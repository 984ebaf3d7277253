"""The reference population the planner runs fedeval's estimators on (`fedeval.api.plan`): fine
per-class leaf counts of a requested size, drawn from a binormal score model with a given AUC
or from a pilot file's own score distribution, on the axis `evaluate` reads data on."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.stats import norm

from fedeval.api.evaluate import threshold_axis
from fedeval.core.axis import ScoreAxis
from fedeval.core.errors import UsageError
from fedeval.tables.scored import ScoredData

RESOLUTION = 20
"""Reference populations are kept at 2^20 cells per class: the truth, up to 2^-20."""


def binormal_density(
    positives: bool, auc: float, n_cells: int, edges: np.ndarray | None = None
) -> np.ndarray:
    """Probability of each score cell under a binormal model on the logit scale with the given
    AUC (d′ = √2·Φ⁻¹(AUC)); scores are sigmoid(logit). The cells are `n_cells` equal ones on
    [0, 1], or those between the ascending score `edges` (n_cells + 1 of them, 0 to 1)."""
    d = math.sqrt(2) * norm.ppf(auc)
    mu = d / 2 if positives else -d / 2
    if edges is None:
        edges = np.linspace(0.0, 1.0, n_cells + 1)
    with np.errstate(divide="ignore"):
        logits = np.log(edges) - np.log1p(-edges)
    cdf = norm.cdf(logits, loc=mu, scale=1.0)
    return np.diff(cdf)


@lru_cache(maxsize=4)
def _reference_densities(auc: float) -> tuple[np.ndarray, np.ndarray]:
    """The binormal model's per-class densities on the 2^RESOLUTION cells of evaluate's axis
    for [0, 1] (`reference_population`'s), read-only: the planner draws many populations of one
    model (`plan --detect` about 30), and each density is two normal CDFs over a million edges."""
    n_cells = 1 << RESOLUTION
    axis = threshold_axis((0.0, 1.0), None)
    edges = np.asarray(axis.from_unit(np.linspace(0.0, 1.0, n_cells + 1)), dtype=np.float64)
    out = tuple(binormal_density(c == 1, auc, n_cells, edges) for c in (0, 1))
    for d in out:
        d.setflags(write=False)
    return out[0], out[1]


def check_pilot(like: ScoredData) -> None:
    """A pilot without an example of a class shows nothing of that class's scores: refused."""
    if min(like.positives, like.rows - like.positives) <= 0:
        label = "positive" if like.positives <= 0 else "negative"
        raise UsageError(
            f"the pilot holds no {label} examples: it cannot show that class's scores, and no "
            "error can be predicted from it (give a pilot with both classes)."
        )


def pilot_densities(like: ScoredData, axis: ScoreAxis) -> list[np.ndarray]:
    """Each class's probability of each of the 2^RESOLUTION cells of `axis`, from the pilot's
    cells (`reference_population`): a cell holding one example spread evenly over the fine
    cells it covers, one holding several placed in the fine cell of its midpoint."""
    n_cells = 1 << RESOLUTION
    fine = like.leaf_counts(min(RESOLUTION, like.resolution)).astype(float)
    k = fine.shape[-1]
    tied = fine.sum(axis=0) >= 2
    edges = np.asarray(axis.from_unit(np.linspace(0.0, 1.0, n_cells + 1)), dtype=np.float64)
    own = np.asarray(like.axis.from_unit(np.linspace(0.0, 1.0, k + 1)))
    mids = like.axis.from_unit((np.arange(k) + 0.5) / k)
    cell = np.minimum((axis.to_unit(mids) * n_cells).astype(np.int64), n_cells - 1)
    out = []
    for f in fine:
        spread = np.where(tied, 0.0, f)
        cdf = np.interp(edges, own, np.r_[0.0, np.cumsum(spread)])
        d = np.clip(np.diff(cdf), 0.0, None) + np.bincount(
            cell, np.where(tied, f, 0.0), minlength=n_cells
        )
        out.append(d / d.sum())
    return out


def reference_population(
    rows: int,
    positives_fraction: float,
    rng: np.random.Generator,
    *,
    auc: float = 0.85,
    like: ScoredData | None = None,
) -> ScoredData:
    """A population of `rows` examples as fine per-class counts: multinomial draws from the
    binormal model (or from `like`'s own per-class score distribution), on the axis evaluate
    reads data on (the default thresholds are cell edges).

    A pilot cell that holds one example is spread evenly over the fine cells it covers (smooth
    scores); one that holds several (a point mass, ties) is one value of the population — the
    fine cell holding its midpoint — so its examples of both classes stay tied, as in the data.
    Spread, their order below the pilot's resolution was drawn at random and the population's
    own AUC moved with it, by as much as the estimator's whole error
    (`benchmarks/plan_families.py`, saturated scores — 35 % exactly 0 or 1 — distdp ε = 1: the
    AUC's error predicted 2.8× the measured)."""
    axis = threshold_axis((0.0, 1.0) if like is None else like.score_range, None)
    if like is not None:
        check_pilot(like)
        dens = pilot_densities(like, axis)
    else:
        dens = list(_reference_densities(auc))
    n_pos = round(rows * positives_fraction)
    counts = np.stack(
        [rng.multinomial(rows - n_pos, dens[0]), rng.multinomial(n_pos, dens[1])]
    ).astype(np.int64)
    return ScoredData(counts, RESOLUTION, rows, rows, axis)
