"""What `fedeval plan` cannot predict: caveats on its expected errors, from the reference it
planned with.

The planner's prediction is the error of fedeval's estimators on a reference population
(`fedeval.api.plan`). Below the resolution released, that population is smooth: the binormal
model everywhere; a pilot's distribution spread evenly inside those of the pilot's own cells
that hold one example (a cell holding several — a tie, a point mass — stays one value). Where the
data are coarse relative to the release's cells (ties, a narrow score range, rare positives with
the rest near one end), the estimators' error depends on how the scores sit inside the few cells
that hold them, and the measured error departs from the prediction
(`benchmarks/plan_families.py`: without a pilot, the precision measured was up to 7.7× the
prediction on scores squeezed into [0.45, 0.55] and 4.5-5.5× on 0.01-grid, tree-model and rare
logistic scores, the AUC up to 2.6×; with a 20,000-row pilot, within 2× on every family but
one, a pilot with 10 positives: precision 3.2× under distdp). A caveat names the metrics and the
reason; where none applies there is none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedeval.estimate.metric_registry import THRESHOLD_METRIC_NAMES
from fedeval.tables.scored import ScoredData


@dataclass(frozen=True)
class Caveat:
    """Metrics whose predicted error may be several times off, and why."""

    metrics: tuple[str, ...]
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"metrics": list(self.metrics), "reason": self.reason}


BINORMAL_CAVEAT = Caveat(
    ("auc", *THRESHOLD_METRIC_NAMES),
    "predicted for smooth scores spread over the score range (the binormal reference); ties, a "
    "narrow score range or rare positives can make the error several times larger (measured: "
    "precision up to 8x, the AUC up to 2.6x); give --like a pilot to predict for your data",
)
"""Without a pilot the data's shape is unknown: this caveat always applies."""

HELD_SHARE = 0.95
"""The share of the pilot's examples whose cells are counted (`CONCENTRATED`)."""

CONCENTRATED = 0.3
"""A pilot whose examples (HELD_SHARE of them) fill less than this fraction of the cells at the
chosen height is coarse for the release. A heuristic set between the families measured: smooth,
tiny, tree, rare-small and logistic-rare pilots fill 0.31-0.91 of the cells (predicted within
2×); squeezed and 0.01-grid pilots fill 0.10-0.25 (squeezed distdp precision 1.94× off, and
2.7× under localdp before `plan` drew unsteady thresholds again)."""

FEW_OF_A_CLASS = 50
"""A pilot with fewer examples of a class than this shows that class's scores too coarsely to
predict from (a 20,000-row pilot of 0.05% positives holds 10: precision 3.2× off under distdp;
one of 0.14% holds 28: within 2×)."""


def cells_holding(counts: np.ndarray, share: float = HELD_SHARE) -> int:
    """The fewest cells that hold `share` of the examples (counts per cell, both classes)."""
    ranked = np.sort(np.asarray(counts, dtype=np.float64).ravel())[::-1]
    if ranked.sum() <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(ranked), share * ranked.sum()) + 1)


def pilot_cells(like: ScoredData, population: ScoredData, height: int) -> np.ndarray:
    """The pilot's examples (both classes) in each of the 2^height cells of the population's
    axis, each pilot cell counted at its midpoint: what the reference population holds in
    expectation. Counted on the pilot, not on a population drawn from it: a draw's count of the
    cells holding 95 % moved by one between draws at the CONCENTRATED boundary (a 0.01-grid
    pilot, h = 4: 4 or 5 of 16 cells), and the caveat came and went with `plan`'s seed."""
    fine = like.leaf_counts(like.resolution).sum(axis=0).astype(np.float64)
    k, n_cells = fine.shape[-1], 1 << height
    mids = like.axis.from_unit((np.arange(k) + 0.5) / k)
    cell = np.minimum((population.axis.to_unit(mids) * n_cells).astype(np.int64), n_cells - 1)
    counts: np.ndarray = np.bincount(cell, fine, minlength=n_cells)
    return counts


def pilot_caveats(population: ScoredData, like: ScoredData, height: int) -> tuple[Caveat, ...]:
    """The caveats on a prediction from the pilot `like` at the chosen `height`: its scores
    (`pilot_cells`, on the axis of the `population` drawn from it) fill few of the 2^height
    cells, or the pilot has fewer distinct score cells than the release has cells (ties), or it
    holds few examples of a class. Empty where none applies."""
    n_cells = 1 << height
    held = cells_holding(pilot_cells(like, population, height))
    distinct = int(np.count_nonzero(like.leaf_counts(like.resolution).sum(axis=0)))
    why = []
    if held < CONCENTRATED * n_cells:
        why.append(
            f"{HELD_SHARE:.0%} of the pilot's scores fall in {held} of the {n_cells} cells at "
            f"h = {height} (a narrow score range, ties or a class near one end)"
        )
    # A pilot of few rows has few distinct scores however smooth they are: ties only where
    # the rows repeat values (at most a quarter as many distinct cells as rows).
    if distinct < n_cells and 4 * distinct <= like.rows:
        why.append(
            f"the pilot's scores take about {distinct} distinct values, fewer than the "
            f"{n_cells} cells at h = {height} (ties)"
        )
    fewest = min(like.positives, like.rows - like.positives)
    if fewest < FEW_OF_A_CLASS:
        label = "positive" if fewest == like.positives else "negative"
        why.append(
            f"the pilot holds only {fewest} {label} examples, too few to show that class's "
            "score distribution"
        )
    if not why:
        return ()
    return (
        Caveat(
            THRESHOLD_METRIC_NAMES,
            "; ".join(why) + ": the reference drawn from the pilot is smoother than such data, "
            "and the measured error can be 2-3x this prediction",
        ),
    )
