"""Noise samplers, each drawing only from the `numpy.random.Generator` it is given.

Discrete Laplace via Pólya shares: Balle, Bell, Gascón, Nissim, "Private summation in the
multi-message shuffle model", CCS 2020 (and Goryczka & Xiong 2015): if each of n clients adds
Pólya(1/n, α) − Pólya(1/n, α), the sum is Pólya(1, α) − Pólya(1, α), the discrete Laplace
P(k) ∝ α^|k|. Pólya(r, α) is numpy's ``negative_binomial(r, 1 − α)``.

Optimal Unary Encoding: Wang, Blocki, Li, Jha, "Locally differentially private protocols for
frequency estimation", USENIX Security 2017, section 4.4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np

Size = int | tuple[int, ...] | None
"""A sampler's `size`: numpy's (None: one value)."""


def laplace_alpha(epsilon: float, sensitivity: int) -> float:
    """α = exp(−ε/Δ): the discrete Laplace that gives ε-DP to a release of L1 sensitivity Δ."""
    return math.exp(-epsilon / sensitivity)


def discrete_laplace_variance(alpha: float) -> float:
    """Var of P(k) ∝ α^|k|: 2α / (1 − α)²."""
    return 2.0 * alpha / (1.0 - alpha) ** 2


def polya(r: float, alpha: float, size: Size, rng: np.random.Generator) -> np.ndarray:
    """Pólya(r, α): P(k) = Γ(k + r)/(k! Γ(r)) · (1 − α)^r · α^k, k ≥ 0."""
    return cast(np.ndarray, rng.negative_binomial(r, 1.0 - alpha, size=size))


def polya_events(
    r: float, alpha: float, n_cells: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """`n_cells` independent Pólya(r, α) draws, sparse: (cell of each event, its value), the
    draw of a cell being the sum of its events' values.

    Pólya(r, α) is compound Poisson: a Poisson(λ) number of logarithmic(α) jumps with
    λ = −r·ln(1 − α) (its pgf ((1 − α)/(1 − αs))^r = exp(λ(G(s) − 1)), G the log-series pgf;
    Johnson, Kemp & Kotz, "Univariate Discrete Distributions", 3rd ed., section 5.12.2). The
    Poisson counts of all cells are one Poisson(n·λ) total spread uniformly over the cells. For
    a client's share (r = 1/m) that is about −ln(1 − α) events per m cells: a few draws for a
    whole cohort's shares instead of two per cell, with the same distribution.
    """
    lam = -r * math.log1p(-alpha)
    m = int(rng.poisson(lam * n_cells))
    return rng.integers(0, n_cells, m), rng.logseries(alpha, m).astype(np.int64)


def polya_share_events(
    n_clients: int, alpha: float, n_cells: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """`n_cells` clients' shares Pólya(1/n, α) − Pólya(1/n, α) as sparse events (see
    `polya_events`): (cells, signed values)."""
    r = 1.0 / n_clients
    up_at, up = polya_events(r, alpha, n_cells, rng)
    down_at, down = polya_events(r, alpha, n_cells, rng)
    return np.concatenate([up_at, down_at]), np.concatenate([up, -down])


def dense(cells: np.ndarray, values: np.ndarray, shape: int | tuple[int, ...]) -> np.ndarray:
    """Sparse events summed into a dense int64 array of `shape`."""
    out = np.zeros(int(np.prod(shape)), np.int64)
    np.add.at(out, cells, values)
    return out.reshape(shape)


def polya_share(n_clients: int, alpha: float, size: Size, rng: np.random.Generator) -> np.ndarray:
    """One client's noise share: Pólya(1/n, α) − Pólya(1/n, α); n shares sum to discrete Laplace."""
    r = 1.0 / n_clients
    return cast(np.ndarray, polya(r, alpha, size, rng) - polya(r, alpha, size, rng))


def polya_sum(
    n_shares: int, n_clients: int, alpha: float, size: Size, rng: np.random.Generator
) -> np.ndarray:
    """The sum of `n_shares` clients' shares, drawn at once (Pólya is closed under r-addition)."""
    r = n_shares / n_clients
    return cast(np.ndarray, polya(r, alpha, size, rng) - polya(r, alpha, size, rng))


def discrete_laplace(
    alpha: float, size: Size, rng: np.random.Generator, dtype: type = np.int64
) -> np.ndarray:
    """Discrete Laplace P(k) ∝ α^|k| as the difference of two geometric draws (numpy's
    ``geometric(1 − α)`` counts trials, so both are shifted by one, which cancels). Pólya(1, α)
    is the same geometric; this sampler is four times faster than ``negative_binomial``.
    `dtype=np.float64` gives the same values as floats (exact: integers far below 2^53),
    without the integer round trip, for resamples that are added to float counts."""
    return cast(
        np.ndarray,
        _geometric(1.0 - alpha, size, rng, dtype) - _geometric(1.0 - alpha, size, rng, dtype),
    )


def _geometric(
    p: float, size: Size, rng: np.random.Generator, dtype: type = np.int64
) -> np.ndarray:
    """``rng.geometric(p, size)``, the same draws, about a third faster: for p < 1/3 numpy
    draws ⌈E / −ln(1 − p)⌉ with E a standard exponential one at a time (inversion), and here
    the exponentials are drawn as one array and mapped in place. E stays below 45 (its tail is
    −ln of a 53-bit uniform), so every value is an integer-valued float well below 2^63."""
    if size is None or not 1e-15 <= p < 1.0 / 3.0:  # numpy's search method, or degenerate
        g = rng.geometric(p, size)
        return cast(np.ndarray, g) if dtype is np.int64 else np.asarray(g).astype(dtype)
    x = rng.standard_exponential(size)
    x /= -math.log1p(-p)
    np.ceil(x, out=x)
    return x.astype(np.int64) if dtype is np.int64 else x.astype(dtype, copy=False)


def oue_probabilities(epsilon: float) -> tuple[float, float]:
    """(p, q) of Optimal Unary Encoding: keep a 1 with p = 1/2, turn a 0 on with q = 1/(e^ε + 1)."""
    return 0.5, 1.0 / (math.exp(epsilon) + 1.0)


def oue_perturb(onehot: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Each client's randomised bit vector (rows are clients): the per-client reference path."""
    p, q = oue_probabilities(epsilon)
    u = rng.random(onehot.shape)
    return np.where(onehot, u < p, u < q)


def oue_perturb_at(
    cols: np.ndarray, width: int, epsilon: float, rng: np.random.Generator, on: np.ndarray | None
) -> np.ndarray:
    """`oue_perturb` of the one-hot rows with their 1 at `cols` (none where `on` is False),
    without making the one-hot matrix: the same uniforms, so the same bits."""
    p, q = oue_probabilities(epsilon)
    u = rng.random((len(cols), width))
    bits = u < q
    rows = np.arange(len(cols)) if on is None else np.flatnonzero(on)
    at = cols if on is None else cols[on]
    bits[rows, at] = u[rows, at] < p
    return bits


@dataclass(frozen=True, eq=False)
class LevelReports:
    """The OUE reports of one level, sparse: m reports of `width` bits whose set bits are
    `kept` reports' own 1-bit (at `cols[kept]`) and the 0-bits at (`flip_rows`, `flip_cols`)."""

    width: int
    cols: np.ndarray  # each report's one-hot column (meaningless where not `real`)
    kept: np.ndarray  # (m,) bool: a real report whose 1-bit stayed on
    flip_rows: np.ndarray  # the report of each 0-bit turned on, non-decreasing
    flip_cols: np.ndarray  # its column

    def dense(self) -> np.ndarray:
        """The reports' bits, (m, width) bool."""
        bits = np.zeros((len(self.cols), self.width), bool)
        bits[self.flip_rows, self.flip_cols] = True
        rows = np.flatnonzero(self.kept)
        bits[rows, self.cols[rows]] = True
        return bits

    def column_sums(self) -> np.ndarray:
        """Set bits per column over the reports (int64)."""
        return np.bincount(self.flip_cols, minlength=self.width) + np.bincount(
            self.cols[self.kept], minlength=self.width
        )


def oue_sparse(
    cols: np.ndarray, width: int, epsilon: float, rng: np.random.Generator, on: np.ndarray | None
) -> LevelReports:
    """OUE reports of the one-hot rows with their 1 at `cols` (none where `on` is False), drawn
    sparse: the 1-bit is kept with probability p; of a report's z other bits (z = width − 1,
    or width for an empty report) Binomial(z, q) are turned on, at z-choose-that-many positions
    uniformly. That is the OUE law exactly (each 0-bit on with probability q, independently),
    in about width·q draws a report instead of width: at ε = 5, q = 0.0067."""
    p, q = oue_probabilities(epsilon)
    m = len(cols)
    real = np.ones(m, bool) if on is None else np.asarray(on, bool)
    zeros = width - real.astype(np.int64)
    n_on = rng.binomial(zeros, q)
    kept = real & (rng.random(m) < p)
    rows = np.repeat(np.arange(m), n_on)
    at = _distinct_positions(rows, zeros[rows], width, rng)
    at += real[rows] & (at >= cols[rows])  # skip the report's own column
    return LevelReports(width, np.asarray(cols, np.int64), kept, rows, at)


def _distinct_positions(
    rows: np.ndarray, size: np.ndarray, width: int, rng: np.random.Generator
) -> np.ndarray:
    """For draws grouped by report (`rows` non-decreasing), positions uniform on
    0..size−1, distinct within a report: uniform draws, the later of any two equal ones in a
    report drawn again until none are. The rule treats every position alike, so the set a
    report ends with is uniform over the sets of its size."""
    at = rng.integers(0, size) if len(rows) else np.zeros(0, np.int64)
    again = np.arange(len(rows))
    while len(again):
        key = rows * width + at
        order = np.argsort(key, kind="stable")
        same = key[order[1:]] == key[order[:-1]]
        again = order[1:][same]
        if len(again):
            at[again] = rng.integers(0, size[again])
    return at


def oue_sum(
    true_counts: np.ndarray, n_reports: int, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """Sum of n OUE reports drawn at once: Binomial(c, p) + Binomial(n − c, q) per bit."""
    p, q = oue_probabilities(epsilon)
    c = np.asarray(true_counts, dtype=np.int64)
    return rng.binomial(c, p) + rng.binomial(n_reports - c, q)


def oue_count_variance(n_reports: int, true_count: float, epsilon: float) -> float:
    """Variance of the unbiased count (C − n·q)/(p − q) (Wang et al. 2017, eq. 9 generalised)."""
    p, q = oue_probabilities(epsilon)
    return (true_count * p * (1 - p) + (n_reports - true_count) * q * (1 - q)) / (p - q) ** 2
