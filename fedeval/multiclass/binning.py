"""FedBin and FedBBQ: federated one-vs-all histogram binning (seed paper 004, algorithm 1).

Each participating client sends, for every class j, a histogram of its class-j positives and one
of its negatives over B fixed-width bins of p̂_j (appendix B.3); the server sums them over clients
and rounds. FedBin maps bin m to P_j(m)/(P_j(m)+N_j(m)); FedBBQ (appendix B.4) scores the merges
of the B = 2^M bins into 2, 4, …, 2^M bins by their Beta-Binomial marginal likelihood (Naeini et
al. 2015) and averages their posterior means. The heterogeneity weighting (section 4.1, appendix
B.5, the paper's "all weight" variant) returns g̃_j(p) = α_j·g_j(p) + (1 − α_j)·p, trusting the
binning only as far as class j has been seen. Outputs are renormalised over classes.

The fast path sums sparse per-client cells with `np.bincount`; `reference_round` builds each
client's histograms one client at a time (the protocol as written) and tests check both agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp

from fedeval.estimate.calibration import BBQ_PRIOR_STRENGTH
from fedeval.multiclass.federation import participants
from fedeval.multiclass.privacy import DPStatement, clip_factors

NEGATIVE, POSITIVE = 0, 1

DENSE_CELLS = 1 << 25
"""Up to this many (client, class, sign, bin) cells, clients' histograms are counted densely
(256 MB of int64 at most); beyond, only the non-empty cells are kept (a sort of n·c ids)."""


def bin_index(p: np.ndarray, n_bins: int) -> np.ndarray:
    """Fixed-width bin of each probability: ⌊p·B⌋, with p = 1 in the last bin (int64)."""
    return np.minimum((np.asarray(p) * n_bins).astype(np.int64), n_bins - 1)


def renormalise(g: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Rows of g divided by their sums (appendix B.3); a row summing to 0 keeps `fallback`."""
    total = g.sum(axis=1, keepdims=True)
    ok = total > 0
    return np.where(ok, g / np.where(ok, total, 1.0), fallback)


@dataclass(frozen=True, eq=False)
class BinningCalibrator:
    """One-vs-all binning maps over B fixed-width bins, with the heterogeneity weights.

    `values` (c, B): g_j on bin m; `alpha` (c,): weight α_j of the binning against the input
    probability (1 everywhere for the unweighted method).
    """

    values: np.ndarray
    alpha: np.ndarray
    method: str

    @property
    def n_bins(self) -> int:
        return self.values.shape[1]

    def __call__(self, probs: np.ndarray) -> np.ndarray:
        """Calibrated probabilities (n, c) for input probabilities (n, c), renormalised."""
        b = bin_index(probs, self.n_bins)
        g = np.take_along_axis(self.values.T, b, axis=0)  # g[i, j] = values[j, b[i, j]]
        g = self.alpha * g + (1.0 - self.alpha) * probs
        return renormalise(g, probs)


@dataclass(frozen=True, eq=False)
class ClientCells:
    """Every client's one-vs-all histograms as sparse cells (one entry per non-empty count).

    `group` numbers (client, class, sign) — one histogram, the unit of clipping; `slot` numbers
    (class, sign, bin) — one coordinate of the summed release.
    """

    client: np.ndarray
    group: np.ndarray
    slot: np.ndarray
    count: np.ndarray
    n_clients: int
    n_classes: int
    n_bins: int


def client_cells(
    probs: np.ndarray, labels: np.ndarray, client: np.ndarray, n_clients: int, n_bins: int
) -> ClientCells:
    """Build the cells once: the clients' data do not change between rounds."""
    c = probs.shape[1]
    b = bin_index(probs, n_bins)
    sign = (labels[:, None] == np.arange(c)).astype(np.int64)
    ids = ((client[:, None] * c + np.arange(c)) * 2 + sign) * n_bins + b
    size = n_clients * c * 2 * n_bins
    if size <= DENSE_CELLS:  # one counting pass, no sort
        dense = np.bincount(ids.ravel(), minlength=size)
        uniq = np.flatnonzero(dense)
        count = dense[uniq]
    else:
        uniq, count = np.unique(ids.ravel(), return_counts=True)
    group, bins = np.divmod(uniq, n_bins)
    cls_sign = group % (2 * c)
    return ClientCells(
        client=group // (2 * c),
        group=group,
        slot=cls_sign * n_bins + bins,
        count=count.astype(np.float64),
        n_clients=n_clients,
        n_classes=c,
        n_bins=n_bins,
    )


def sum_round(
    cells: ClientCells, taking_part: np.ndarray, clip: tuple[float, float] | None
) -> np.ndarray:
    """Σ over participating clients of their (clipped) histograms, shape (c, 2, B).

    `clip` = (C₊, C₋): each client's class-j positive (negative) histogram is scaled to L2 norm
    at most C₊ (C₋) before the sum (section 4.3).
    """
    sel = taking_part[cells.client]
    count = cells.count[sel]
    if clip is not None:
        group = cells.group[sel]
        norm_sq = np.bincount(group, count * count, minlength=cells.n_clients * cells.n_classes * 2)
        bound = np.where(np.arange(len(norm_sq)) % 2 == POSITIVE, clip[0], clip[1])
        factor = clip_factors(norm_sq, bound)
        count = count * factor[group]
    c, b = cells.n_classes, cells.n_bins
    return np.bincount(cells.slot[sel], count, minlength=c * 2 * b).reshape(c, 2, b)


def reference_round(
    probs: np.ndarray,
    labels: np.ndarray,
    client: np.ndarray,
    taking_part: np.ndarray,
    n_bins: int,
    clip: tuple[float, float] | None,
) -> np.ndarray:
    """`sum_round` the slow way: each participating client builds and clips its 2c histograms."""
    c = probs.shape[1]
    total = np.zeros((c, 2, n_bins))
    for k in np.flatnonzero(taking_part):
        mine = client == k
        p, y = probs[mine], labels[mine]
        for j in range(c):
            for sign in (NEGATIVE, POSITIVE):
                rows = (y == j) == bool(sign)
                h = np.zeros(n_bins)
                np.add.at(h, bin_index(p[rows, j], n_bins), 1.0)
                if clip is not None:
                    bound = clip[0] if sign == POSITIVE else clip[1]
                    norm = math.sqrt(float(h @ h))
                    if norm > bound:
                        h *= bound / norm
                total[j, sign] += h
    return total


def binning_values(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """FedBin: P(m)/(P(m)+N(m)) per class and bin (appendix B.3); noisy counts clamped at 0,
    and a bin with no mass maps to its midpoint (it holds no evidence either way)."""
    pos, neg = np.clip(pos, 0.0, None), np.clip(neg, 0.0, None)
    mass = pos + neg
    n_bins = pos.shape[-1]
    mid = (np.arange(n_bins) + 0.5) / n_bins
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mass > 0, pos / np.where(mass > 0, mass, 1.0), mid)


def bbq_values(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """FedBBQ: Bayesian average over the merges of the 2^M bins into 2, 4, …, 2^M bins.

    Binning k (B_k = 2^k bins) scores Π_b Γ(N′/B_k)/Γ(N_b + N′/B_k) · Γ(m_b + a_b)/Γ(a_b) ·
    Γ(n_b + c_b)/Γ(c_b), a_b = (N′/B_k)·s_b, c_b = (N′/B_k)(1 − s_b), s_b the bin midpoint,
    N′ = 2 (appendix B.4; Naeini et al. 2015), in log space; each binning predicts its
    posterior mean (m_b + a_b)/(N_b + N′/B_k). Noisy counts are clamped at 0 (Γ needs them ≥ 0).
    Returns (c, 2^M) values on the fine bins.
    """
    pos, neg = np.clip(pos, 0.0, None), np.clip(neg, 0.0, None)
    c, n_bins = pos.shape
    bits = int(math.log2(n_bins))
    if 1 << bits != n_bins or bits < 1:
        raise ValueError(f"FedBBQ needs 2^M bins with M ≥ 1. Found {n_bins}.")
    log_scores = np.empty((c, bits))
    fine_values = np.empty((c, bits, n_bins))
    for k in range(1, bits + 1):
        width = n_bins >> k  # fine bins per coarse bin
        m = pos.reshape(c, 1 << k, width).sum(axis=2)
        n = neg.reshape(c, 1 << k, width).sum(axis=2)
        prior = BBQ_PRIOR_STRENGTH / (1 << k)
        s = (np.arange(1 << k) + 0.5) / (1 << k)
        a, b = prior * s, prior * (1 - s)
        log_scores[:, k - 1] = np.sum(
            gammaln(prior)
            - gammaln(m + n + prior)
            + gammaln(m + a)
            - gammaln(a)
            + gammaln(n + b)
            - gammaln(b),
            axis=1,
        )
        fine_values[:, k - 1] = np.repeat((m + a) / (m + n + prior), width, axis=1)
    weights = np.exp(log_scores - logsumexp(log_scores, axis=1, keepdims=True))
    return np.einsum("ck,ckb->cb", weights, fine_values)


def class_weights(
    seen: np.ndarray, totals: np.ndarray | None, *, noise_sd: float | None, n_bins: int
) -> np.ndarray:
    """α_j of the heterogeneity weighting (section 4.1, appendix B.5).

    Without DP, α_j = min(Ñ_j/N_j, 1): Ñ_j class-j examples aggregated so far over N_j in the
    population (a class never seen gets α_j = 0). Under DP N_j is private, and Ñ_j is compared
    with the expected absolute noise of the positive histogram, √(2/π)·σ·B (σ the noise SD per
    bin of the accumulated histogram): α̃_j = clip(Ñ_j / (√(2/π)·σ·B), 0, 1).
    """
    if noise_sd is not None:
        return np.clip(seen / (math.sqrt(2 / math.pi) * noise_sd * n_bins), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(totals > 0, np.minimum(seen / np.where(totals > 0, totals, 1), 1.0), 0.0)


@dataclass(frozen=True, eq=False)
class BinningFit:
    """A fitted binning calibrator and what the server saw: the summed histograms (c, 2, B)
    (noisy under DP) and the class counts Ñ_j read off them."""

    calibrator: BinningCalibrator
    histograms: np.ndarray
    seen: np.ndarray


def fit_from_histograms(
    hist: np.ndarray,
    *,
    bbq: bool,
    weighted: bool,
    totals: np.ndarray | None = None,
    noise_sd: float | None = None,
) -> BinningFit:
    """The server's post-processing of the summed histograms into a calibrator."""
    neg, pos = hist[:, NEGATIVE], hist[:, POSITIVE]
    values = bbq_values(pos, neg) if bbq else binning_values(pos, neg)
    seen = pos.sum(axis=1)
    c, n_bins = pos.shape
    if weighted:
        alpha = class_weights(seen, totals, noise_sd=noise_sd, n_bins=n_bins)
    else:
        alpha = np.ones(c)
    name = ("fedbbq" if bbq else "fedbin") + ("" if weighted else "-unweighted")
    return BinningFit(BinningCalibrator(values, alpha, name), hist, seen)


def fed_binning(
    probs: np.ndarray,
    labels: np.ndarray,
    client: np.ndarray,
    n_clients: int,
    *,
    n_bins: int,
    bbq: bool,
    weighted: bool,
    rounds: int,
    participation: float,
    participation_rng: np.random.Generator,
    noise_rng: np.random.Generator | None = None,
    dp: DPStatement | None = None,
    clip: tuple[float, float] | None = None,
    per_client: bool = False,
) -> BinningFit:
    """Algorithm 1 over `rounds` rounds: sample clients, sum their (clipped) histograms, add
    Gaussian noise under DP, accumulate; then fit FedBin or FedBBQ from the sums.

    `dp` gives σ₊, σ₋ (and implies clipping at its C₊, C₋); `clip` clips without noise.
    `per_client` takes the reference path (one client at a time).
    """
    if dp is not None:
        clip = (dp.clip["positive"], dp.clip["negative"])
    c = probs.shape[1]
    cells = None if per_client else client_cells(probs, labels, client, n_clients, n_bins)
    total = np.zeros((c, 2, n_bins))
    for _ in range(rounds):
        part = participants(n_clients, participation, participation_rng)
        if per_client:
            total += reference_round(probs, labels, client, part, n_bins, clip)
        else:
            total += sum_round(cells, part, clip)
        if dp is not None:
            sd = np.array([dp.sigma["negative"], dp.sigma["positive"]])[None, :, None]
            total += sd * noise_rng.standard_normal((c, 2, n_bins))
    totals = np.bincount(labels, minlength=c).astype(np.float64)
    noise_sd = None if dp is None else dp.sigma["positive"] * math.sqrt(rounds)
    return fit_from_histograms(total, bbq=bbq, weighted=weighted, totals=totals, noise_sd=noise_sd)


def central_binning(
    probs: np.ndarray, labels: np.ndarray, *, n_bins: int, bbq: bool
) -> BinningCalibrator:
    """Histogram binning (or BBQ) fitted on all the data at once: the central baseline."""
    c = probs.shape[1]
    b = bin_index(probs, n_bins)
    hist = np.zeros((c, 2, n_bins))
    for j in range(c):
        pos = labels == j
        hist[j, POSITIVE] = np.bincount(b[pos, j], minlength=n_bins)
        hist[j, NEGATIVE] = np.bincount(b[~pos, j], minlength=n_bins)
    fit = fit_from_histograms(hist, bbq=bbq, weighted=False).calibrator
    return BinningCalibrator(fit.values, fit.alpha, "bbq" if bbq else "binning")
