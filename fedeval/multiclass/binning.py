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
from fedeval.multiclass.denoise import NoisyBinning, denoise_binning
from fedeval.multiclass.federation import schedule
from fedeval.privacy.gaussian import DPStatement, clip_factors

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
    probability (1 everywhere for the unweighted method); `bin_weights` (c, B) or None: a
    further weight per class and bin (the DP shrinkage, `denoise.denoise_binning`), so the weight of
    g_j on bin m is α_j·bin_weights[j, m].
    """

    values: np.ndarray
    alpha: np.ndarray
    method: str
    bin_weights: np.ndarray | None = None

    @property
    def n_bins(self) -> int:
        bins: int = self.values.shape[1]
        return bins

    def weights(self) -> np.ndarray:
        """(c, B): the weight of the binning on every class and bin."""
        w = np.broadcast_to(self.alpha[:, None], self.values.shape)
        return w if self.bin_weights is None else w * self.bin_weights

    def __call__(self, probs: np.ndarray) -> np.ndarray:
        """Calibrated probabilities (n, c) for input probabilities (n, c), renormalised."""
        b = bin_index(probs, self.n_bins)
        g = np.take_along_axis(self.values.T, b, axis=0)  # g[i, j] = values[j, b[i, j]]
        if self.bin_weights is None:
            a = self.alpha
        else:
            a = np.take_along_axis(self.weights().T, b, axis=0)
        g = a * g + (1.0 - a) * probs
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
    probs: np.ndarray,
    labels: np.ndarray,
    client: np.ndarray,
    n_clients: int,
    n_bins: int,
    *,
    pooled: bool = False,
    skip_first: bool = False,
) -> ClientCells:
    """Build the cells once: the clients' data do not change between rounds.

    `pooled`: one positive and one negative histogram per client over every (example, class)
    pair — the c one-vs-all histograms summed (a map shared by the classes). `skip_first`: bin
    0 (p < 1/B) is not sent (`fed_binning` explains why).
    """
    c = probs.shape[1]
    b = bin_index(probs, n_bins)
    sign = (labels[:, None] == np.arange(c)).astype(np.int64)
    cls = np.zeros(c, np.int64) if pooled else np.arange(c)
    ids = ((client[:, None] * (1 if pooled else c) + cls) * 2 + sign) * n_bins + b
    c = 1 if pooled else c
    size = n_clients * c * 2 * n_bins
    if size <= DENSE_CELLS:  # one counting pass, no sort
        dense = np.bincount(ids.ravel(), minlength=size)
        uniq = np.flatnonzero(dense)
        count = dense[uniq]
    else:
        uniq, count = np.unique(ids.ravel(), return_counts=True)
    if skip_first:
        keep = uniq % n_bins > 0
        uniq, count = uniq[keep], count[keep]
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

    `clip` = (C₊, C₋): each client's class-j positive and negative histograms are scaled by one
    factor min(1, C₊/‖h₊‖₂, C₋/‖h₋‖₂), so that their L2 norms are at most C₊ and C₋ (section
    4.3). The paper clips the two separately; one factor for both keeps the client's ratio
    P(m)/(P(m)+N(m)) — what the map estimates — instead of tilting it towards the class whose
    histogram was clipped less (a bias of C₊/‖h₊‖ ÷ C₋/‖h₋‖, often 2× or more).
    """
    sel = taking_part[cells.client]
    count = cells.count[sel]
    if clip is not None:
        group = cells.group[sel]
        norm_sq = np.bincount(group, count * count, minlength=cells.n_clients * cells.n_classes * 2)
        bound = np.where(np.arange(len(norm_sq)) % 2 == POSITIVE, clip[0], clip[1])
        factor = clip_factors(norm_sq, bound).reshape(-1, 2).min(axis=1)
        count = count * factor[group // 2]
    c, b = cells.n_classes, cells.n_bins
    return np.bincount(cells.slot[sel], count, minlength=c * 2 * b).reshape(c, 2, b)


def reference_round(
    probs: np.ndarray,
    labels: np.ndarray,
    client: np.ndarray,
    taking_part: np.ndarray,
    n_bins: int,
    clip: tuple[float, float] | None,
    *,
    pooled: bool = False,
    skip_first: bool = False,
) -> np.ndarray:
    """`sum_round` the slow way: each participating client builds and clips its 2c histograms
    (or, `pooled`, its two class-summed histograms)."""
    c = probs.shape[1]
    total = np.zeros((1 if pooled else c, 2, n_bins))
    for k in np.flatnonzero(taking_part):
        mine = client == k
        p, y = probs[mine], labels[mine]
        hists = np.zeros((c, 2, n_bins))
        for j in range(c):
            for sign in (NEGATIVE, POSITIVE):
                rows = (y == j) == bool(sign)
                np.add.at(hists[j, sign], bin_index(p[rows, j], n_bins), 1.0)
        if pooled:
            hists = hists.sum(axis=0, keepdims=True)
        if skip_first:
            hists[:, :, 0] = 0.0
        for j in range(len(hists)):
            if clip is not None:
                factor = 1.0
                for sign, bound in ((POSITIVE, clip[0]), (NEGATIVE, clip[1])):
                    norm = math.sqrt(float(hists[j, sign] @ hists[j, sign]))
                    if norm > bound:
                        factor = min(factor, bound / norm)
                hists[j] *= factor
            total[j] += hists[j]
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
    merged: np.ndarray = np.einsum("ck,ckb->cb", weights, fine_values)
    return merged


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
    if totals is None:
        raise ValueError("without DP noise the class weights need the class totals N_j")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(totals > 0, np.minimum(seen / np.where(totals > 0, totals, 1), 1.0), 0.0)


def monotone_values(
    values: np.ndarray, weights: np.ndarray, mass: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(values, weights) whose shrunk map is non-decreasing over the bins: isotonic regression
    (pool adjacent violators, `scipy.optimize.isotonic_regression`) of each class's effective
    value at the bin midpoints, e_m = w_m·g_m + (1 − w_m)·mid_m, weighted by w_m·(P + N)_m;
    then g_m = (e_m − (1 − w_m)·mid_m)/w_m, and where that leaves [0, 1] the bin keeps e_m with
    g_m = 1 (or 0) and the weight that gives it, w_m = (e_m − mid_m)/(1 − mid_m) (or
    (mid_m − e_m)/mid_m). Bins with w_m ≈ 0 are left as they are.

    A calibration map should not decrease (DESIGN: "keep the map monotone under noise"); under
    DP the noise makes neighbouring bins cross, which reorders classes after renormalisation.
    `fit_from_histograms` applies it to the denoised map (`fedeval.multiclass.denoise`).
    """
    from scipy.optimize import isotonic_regression

    n_bins = values.shape[1]
    mid = (np.arange(n_bins) + 0.5) / n_bins
    g, w = values.copy(), weights.copy()
    for j in range(values.shape[0]):  # c rows of B values: the loop is over classes only
        ok = weights[j] > 1e-9
        eff = weights[j] * values[j] + (1 - weights[j]) * mid
        e = isotonic_regression(eff, weights=np.maximum(weights[j] * mass[j], 1e-12)).x
        e = np.where(ok, e, eff)
        solved = (e - (1 - weights[j]) * mid) / np.where(ok, weights[j], 1.0)
        up, down = ok & (solved > 1), ok & (solved < 0)
        g[j] = np.where(ok, np.clip(solved, 0.0, 1.0), values[j])
        w[j] = np.where(up, (e - mid) / (1 - mid), np.where(down, (mid - e) / mid, weights[j]))
    return g, np.clip(w, 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class BinningFit:
    """A fitted binning calibrator and what the server saw: the summed histograms (c, 2, B)
    (noisy under DP; (1, 2, B) when pooled) and the class counts Ñ_j read off them.
    `schedule` (T, K): which client was sampled in which round (each contributes once).
    `check`: under DP (weighted), the release's own check of the map against the identity
    (`denoise.NoisyBinning`); when it fails the calibrator is the identity."""

    calibrator: BinningCalibrator
    histograms: np.ndarray
    seen: np.ndarray
    schedule: np.ndarray | None = None
    check: NoisyBinning | None = None


def fit_from_histograms(
    hist: np.ndarray,
    *,
    bbq: bool,
    weighted: bool,
    totals: np.ndarray | None = None,
    noise_sd: float | None = None,
    sigma: tuple[float, float] | None = None,
    n_classes: int | None = None,
) -> BinningFit:
    """The server's post-processing of the summed histograms into a calibrator.

    `sigma` = (σ₊, σ₋) of the noise on the sums: weighted, the map is post-processed as noisy
    bins should be (`denoise.denoise_binning`: grouped where the noise allows, monotone, shrunk
    toward the identity by each bin's noise, and the identity where the release cannot show a
    gain; FedBin and FedBBQ alike) and made monotone (`monotone_values`); unweighted, the noisy
    frequencies are kept as they are where the same check shows a gain, else the identity. A
    pooled (1, 2, B) release is copied to `n_classes` classes.
    """
    neg, pos = hist[:, NEGATIVE], hist[:, POSITIVE]
    seen = pos.sum(axis=1)
    c, n_bins = pos.shape
    bin_w = None
    check = None
    if sigma is not None:
        # Bin 0 is not released under DP: its sum is noise alone (the identity there).
        released = np.arange(n_bins) > 0
        check = denoise_binning(pos, neg, sigma, released=released)
    alpha = np.ones(c)
    if check is not None and weighted:
        values, bin_w = check.values, check.weights
        if check.kept:
            mass = np.clip(pos, 0, None) + np.clip(neg, 0, None)
            values, bin_w = monotone_values(values, bin_w, mass * released)
    elif check is not None:
        # Unweighted under DP: the noisy frequencies as they are (no shrinkage), bin 0 the
        # identity (read as a frequency, its noise alone would map p < 1/B to 0, 1 or anything
        # between) — and the identity everywhere when the release shows no gain.
        values = bbq_values(pos, neg) if bbq else binning_values(pos, neg)
        bin_w = np.ones((c, n_bins))
        bin_w[:, 0] = 0.0
        if not check.kept:
            values, bin_w = check.values, check.weights
    else:
        values = bbq_values(pos, neg) if bbq else binning_values(pos, neg)
        if weighted:
            alpha = class_weights(seen, totals, noise_sd=noise_sd, n_bins=n_bins)
    if n_classes is not None and n_classes != c:  # pooled: one map for every class
        values = np.repeat(values, n_classes, axis=0)
        alpha = np.repeat(alpha, n_classes)
        bin_w = None if bin_w is None else np.repeat(bin_w, n_classes, axis=0)
    name = ("fedbbq" if bbq else "fedbin") + ("" if weighted else "-unweighted")
    return BinningFit(BinningCalibrator(values, alpha, name, bin_w), hist, seen, check=check)


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
    pooled: bool = False,
    per_client: bool = False,
) -> BinningFit:
    """Algorithm 1 with each client's data counted once: the T rounds sample cohorts without
    replacement across rounds (`federation.schedule`), every client sampled in any round sends
    its (clipped) histograms once, and the secure sum over all of them is unmasked once — with
    Gaussian noise N(0, σ₊²), N(0, σ₋²) per bin under DP; then FedBin or FedBBQ is fitted from
    the sums. (The paper sums every round's cohort, so a client sampled twice counts twice and
    the map tends to plain binning of the frequent clients; the noise is added T times.)

    Under DP the map is post-processed as noisy bins should be (`fit_from_histograms`): the
    identity wherever the release cannot show a gain; without DP α_j is the paper's
    min(Ñ_j/N_j, 1). `pooled` sums the c one-vs-all histograms into one pair (one
    map for every class): 2 releases instead of 2c and c times the data per bin.
    `dp` gives σ₊, σ₋ (and implies clipping at its C₊, C₋); `clip` clips without noise.
    `per_client` takes the reference path (one client at a time).

    Under DP bin 0 (p < 1/B) is neither sent nor calibrated (it keeps the input probability):
    nearly every (example, class) pair falls there — (c − 1)/c of a client's negatives — so it
    sets the L2 norm of the negative histogram, and with it the clip and the noise on every
    other bin, while the map it would give (a frequency near 0 for probabilities near 0) is
    the identity's to within 1/B.
    """
    if dp is not None:
        clip = (dp.clip["positive"], dp.clip["negative"])
    c = probs.shape[1]
    plan = schedule(n_clients, rounds, participation, participation_rng)
    taking_part: np.ndarray = np.asarray(plan.any(axis=0))
    skip = dp is not None
    if per_client:
        total = reference_round(
            probs, labels, client, taking_part, n_bins, clip, pooled=pooled, skip_first=skip
        )
    else:
        cells = client_cells(
            probs, labels, client, n_clients, n_bins, pooled=pooled, skip_first=skip
        )
        total = sum_round(cells, taking_part, clip)
    sigma = None
    if dp is not None:
        sigma = (dp.sigma["positive"], dp.sigma["negative"])
        if noise_rng is None:
            raise ValueError("a DP fit needs `noise_rng` to draw its noise from")
        sd = np.array([sigma[1], sigma[0]])[None, :, None]
        total = total + sd * noise_rng.standard_normal(total.shape)
    totals = np.bincount(labels, minlength=c).astype(np.float64)
    if pooled:
        totals = np.array([float(len(labels))])
    fit = fit_from_histograms(
        total, bbq=bbq, weighted=weighted, totals=totals, sigma=sigma, n_classes=c
    )
    return BinningFit(fit.calibrator, fit.histograms, fit.seen, plan, fit.check)


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
