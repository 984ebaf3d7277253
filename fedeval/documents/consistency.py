"""Consistency checks of a saved release: what its counts must satisfy, whoever wrote them.

A seal (`fedeval.documents.seals`) shows a file was not edited after it was written; these checks
catch
a release whose numbers cannot have come from the protocol at all (hand-made, or edited and
re-sealed), before anything is estimated from them:

- every count is a finite integer; reporters and clients are ≥ 0;
- federated (exact sums, no noise): every count is ≥ 0; each level-k cell equals the sum of its
  two cells at the next released level (per class); every level adds up to the same total, equal
  to that level's reporters; the positives of a level never exceed its rows; under unit client
  the rows never exceed clients × L;
- localdp: the reports per level are stated, and every released bit count lies between 0 and the
  number of reports of its level (each report sets a bit at most once); under unit client every
  client sends exactly L reports, so the reports add up to clients × L;
- distdp: only the first check (discrete Laplace noise makes any integer possible).

The model-specific checks are each model's own (`check_counts` of `fedeval.privacy.federated`,
`distdp`, `localdp`).

`check_release_consistency` raises `InputError` with one line naming the file and the check.
"""

from __future__ import annotations

import math

import numpy as np

from fedeval.core.errors import InputError
from fedeval.core.release import Release, level_offsets
from fedeval.privacy.base import SavedCounts
from fedeval.privacy.registry import model_of


def check_release_consistency(
    release: Release, score_range: tuple[float, float], name: str
) -> None:
    """Refuse a release whose counts the protocol cannot have produced; `InputError` names the
    file (`name`) and the failed check."""

    def fail(what: str) -> InputError:
        return InputError(f"'{name}': consistency check failed: {what}.")

    lo, hi = (float(x) for x in score_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise fail(f"the score range [{lo}, {hi}] is not two finite numbers lo < hi")
    counts = _integer_array(release.counts)
    if counts is None:
        raise fail("every count must be a finite integer")
    reporters = None if release.reporters is None else _integer_array(release.reporters)
    if release.reporters is not None:
        if reporters is None:
            raise fail("the reports per level must be finite integers")
        if np.any(reporters < 0):
            i = int(np.flatnonzero(reporters < 0)[0])
            raise fail(
                f"level {release.config.levels[i]} has {int(reporters[i])} reports (negative)"
            )
    n_clients = release.n_clients
    if n_clients is not None and (
        isinstance(n_clients, bool) or not isinstance(n_clients, int | np.integer) or n_clients < 0
    ):
        raise fail(f"the number of clients must be an integer ≥ 0; found {n_clients!r}")

    cfg = release.config
    levels = _levels(counts, release)
    saved = SavedCounts(cfg, levels, reporters, n_clients, release.probe)
    model_of(cfg.model).check_counts(saved, fail)


def _integer_array(values: np.ndarray) -> np.ndarray | None:
    """`values` as int64 if every entry is a finite integer (any numeric dtype), else None."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "fO":
        return None
    try:
        f = arr.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        return None
    if not np.all(np.isfinite(f)) or np.any(f != np.floor(f)) or np.any(np.abs(f) >= 2.0**63):
        return None
    return f.astype(np.int64)


def _levels(counts: np.ndarray, release: Release) -> list[np.ndarray]:
    """Counts per released level, shape (2, 2^k), from the checked integer counts."""

    off = level_offsets(release.config)
    return [
        counts[off[i] : off[i + 1]].reshape(2, 1 << k) for i, k in enumerate(release.config.levels)
    ]
