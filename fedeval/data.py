"""The scored data a simulation holds, reduced as it streams in: leaf counts per class at a
fixed resolution (any coarser height is a sum of them), and, when asked for, the raw scores (for
the exact metrics) and per-example records (for the per-client reference path)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fedeval.axis import ScoreAxis
from fedeval.errors import UsageError
from fedeval.estimate.exact import SortedScores
from fedeval.hierarchy import cell_index, coarsen
from fedeval.io import DEFAULT_COLUMNS, Batch, Columns, read_batches, validate_batch


@dataclass(frozen=True, eq=False)
class Examples:
    """Per-example records for the per-client path: unit scores, positives, client codes."""

    unit_scores: np.ndarray
    positive: np.ndarray
    client: np.ndarray  # int64 codes 0..n_clients-1


@dataclass(frozen=True, eq=False)
class ScoredData:
    """Sufficient statistics of a scored, labelled table.

    `fine_counts` has shape (2, 2^resolution): [negatives, positives] per cell of the scores
    mapped to [0, 1] by `axis` (linear on the score range, or warped so declared thresholds fall
    on cell edges).
    """

    fine_counts: np.ndarray
    resolution: int
    rows: int
    n_clients: int
    axis: ScoreAxis
    sorted_scores: SortedScores | None = None
    examples: Examples | None = None
    client_ids: pa.Array | None = None  # the id of each client code, when examples are kept
    dropped: int = 0  # examples left out by a per-client cap (see `cap_examples`)

    @property
    def score_range(self) -> tuple[float, float]:
        return self.axis.score_range

    @property
    def positives(self) -> int:
        return int(self.fine_counts[1].sum())

    @property
    def negatives(self) -> int:
        return int(self.fine_counts[0].sum())

    def leaf_counts(self, height: int) -> np.ndarray:
        """Exact per-class counts of the 2^height leaves, shape (2, 2^height)."""
        if height > self.resolution:
            raise UsageError(
                f"the data were reduced to height {self.resolution}; height {height} needs them "
                f"read again at that resolution."
            )
        return coarsen(self.fine_counts, height)

    def to_unit(self, x: np.ndarray | float) -> np.ndarray:
        """Map scores (or thresholds) from the score range onto [0, 1]."""
        return self.axis.to_unit(x)


class _Accumulator:
    def __init__(self, resolution: int, axis: ScoreAxis, keep_scores: bool, keep_examples: bool):
        self.resolution = resolution
        self.axis = axis
        self.keep_scores = keep_scores
        self.keep_examples = keep_examples
        self.counts = np.zeros(2 << resolution, np.int64)
        self.rows = 0
        self.neg: list[np.ndarray] = []
        self.pos: list[np.ndarray] = []
        self.unit: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.clients: list[pa.Array] = []

    def add(self, b: Batch) -> None:
        hi = self.axis.hi
        n_leaves = 1 << self.resolution
        unit = b.scores
        if self.axis != ScoreAxis.linear():
            unit = self.axis.to_unit(b.scores)
        # Same cells as hierarchy.cell_index, in fewer passes: scaling by 2^h is exact in any
        # float width; the clamp is needed only when a score sits on the top of the range; the
        # class goes into the index by an in-place masked add.
        idx = (unit * n_leaves).astype(np.int64)
        if b.score_max >= hi:
            np.minimum(idx, n_leaves - 1, out=idx)
        np.add(idx, n_leaves, out=idx, where=b.positive)
        self.counts += np.bincount(idx, minlength=2 * n_leaves)
        self.rows += len(idx)
        if self.keep_scores:
            self.neg.append(b.scores[~b.positive])
            self.pos.append(b.scores[b.positive])
        if self.keep_examples:
            self.unit.append(unit)
            self.labels.append(b.positive)
        if b.clients is not None:
            self.clients.append(b.clients)

    def finish(self) -> ScoredData:
        sorted_scores = None
        if self.keep_scores:
            sorted_scores = SortedScores(
                np.sort(np.concatenate(self.neg)), np.sort(np.concatenate(self.pos))
            )
        codes = uniques = None
        if self.clients:
            ids = pa.chunked_array(self.clients)
            if self.keep_examples:
                import pandas as pd  # only the per-client path needs dense client codes

                codes, uniques = pd.factorize(ids.to_pandas())
                n_clients = len(uniques)
            else:
                n_clients = pc.count_distinct(ids).as_py()
        else:
            n_clients = self.rows  # one example per client: the papers' setting
        examples = None
        if self.keep_examples:
            client = np.arange(self.rows) if codes is None else codes.astype(np.int64)
            examples = Examples(np.concatenate(self.unit), np.concatenate(self.labels), client)
        return ScoredData(
            self.counts.reshape(2, 1 << self.resolution),
            self.resolution,
            self.rows,
            n_clients,
            self.axis,
            sorted_scores,
            examples,
            None if uniques is None else pa.array(uniques),
        )


DEFAULT_RESOLUTION = 16
"""Enough for every height `--height auto` picks."""


def _axis(score_range: tuple[float, float], axis: ScoreAxis | None) -> ScoreAxis:
    lo, hi = (float(x) for x in score_range)
    if axis is None:
        return ScoreAxis.linear(lo, hi)
    if axis.score_range != (lo, hi) and (lo, hi) != (0.0, 1.0):
        raise UsageError(
            f"the axis spans [{axis.lo:g}, {axis.hi:g}] but the score range is [{lo:g}, {hi:g}]."
        )
    return axis


def _accumulate(
    batches: Iterable[Batch], resolution: int, axis: ScoreAxis, keep_scores, keep_examples
) -> ScoredData:
    acc = _Accumulator(resolution, axis, keep_scores, keep_examples)
    for b in batches:
        acc.add(b)
    return acc.finish()


def read_scored(
    source: str | os.PathLike,
    columns: Columns = DEFAULT_COLUMNS,
    *,
    score_range: tuple[float, float] = (0.0, 1.0),
    pos_label: object = None,
    keep_scores: bool = True,
    keep_examples: bool = False,
    resolution: int = DEFAULT_RESOLUTION,
    axis: ScoreAxis | None = None,
) -> ScoredData:
    """Stream a Parquet/CSV file (or '-') into `ScoredData` with 2^resolution cells per class,
    in bounded memory unless scores or examples are kept. `axis` (default: linear on
    `score_range`) maps scores onto the cells."""
    axis = _axis(score_range, axis)
    batches = read_batches(source, columns, score_range=axis.score_range, pos_label=pos_label)
    return _accumulate(batches, resolution, axis, keep_scores, keep_examples)


def cap_examples(data: ScoredData, max_examples: int, rng: np.random.Generator) -> ScoredData:
    """Keep at most `max_examples` examples per client, chosen uniformly at random without
    replacement: the contribution bound that unit-client privacy rests on.

    The exact values (`sorted_scores`) keep every example: they are what the user wants to know,
    so the cap's bias shows in the error. Needs per-example records.
    """
    ex = data.examples
    if ex is None:
        raise UsageError("capping examples per client needs per-example data (keep_examples=True).")
    n = len(ex.client)
    shuffled = rng.permutation(n)
    order = shuffled[np.argsort(ex.client[shuffled], kind="stable")]
    client_sorted = ex.client[order]
    starts = np.flatnonzero(np.r_[True, client_sorted[1:] != client_sorted[:-1]])
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    keep = np.sort(order[rank < max_examples])
    if len(keep) == n:
        return data
    unit = ex.unit_scores[keep]
    positive = ex.positive[keep]
    n_leaves = 1 << data.resolution
    cells = cell_index(unit, data.resolution)
    counts = np.bincount(cells + n_leaves * positive, minlength=2 * n_leaves)
    return ScoredData(
        counts.reshape(2, n_leaves),
        data.resolution,
        len(keep),
        data.n_clients,
        data.axis,
        data.sorted_scores,
        Examples(unit, positive, ex.client[keep]),
        data.client_ids,
        data.dropped + n - len(keep),
    )


def scored_from_arrays(
    y_true,
    y_score,
    *,
    client_ids=None,
    pos_label: object = None,
    score_range: tuple[float, float] = (0.0, 1.0),
    keep_scores: bool = True,
    keep_examples: bool = False,
    resolution: int = DEFAULT_RESOLUTION,
    axis: ScoreAxis | None = None,
) -> ScoredData:
    """Validate in-memory arrays exactly as a file would be, and reduce them."""
    axis = _axis(score_range, axis)
    from fedeval.errors import InputError

    y_score, y_true = np.asarray(y_score), np.asarray(y_true)
    if y_score.ndim != 1 or y_true.shape != y_score.shape:
        raise InputError(
            f"y_true and y_score must be 1-D and of equal length. Found shapes {y_true.shape} "
            f"and {y_score.shape}."
        )
    if client_ids is not None and np.shape(client_ids) != y_score.shape:
        raise InputError(
            f"client_ids must have shape {y_score.shape}. Found {np.shape(client_ids)}."
        )
    cols = {"score": pa.array(y_score), "label": pa.array(y_true)}
    if client_ids is not None:
        cols["client"] = pa.array(np.asarray(client_ids))
    rb = pa.record_batch(cols)
    if rb.num_rows == 0:
        raise InputError("y_true and y_score are empty: nothing to evaluate.")
    batch = validate_batch(
        rb,
        "<arrays>",
        "score",
        "label",
        "client" if client_ids is not None else None,
        score_range=axis.score_range,
        pos_label=pos_label,
    )
    return _accumulate([batch], resolution, axis, keep_scores, keep_examples)
