"""Local DP: each example's report is an Optimal Unary Encoding of (label, cell) at one level.

The domain of a level-k report is label × cell (2 · 2^k bits), so one OUE report covers both
class histograms at the cost of one. Under the hierarchy shape each example reports one level,
chosen at random (uniformly, or with a public split's probabilities,
`fedeval.privacy.report_split`), with the full ε; the aggregator rescales that level's counts by
n / n_k (Cormode & Markov, appendix A; Wang et al. 2017). Changing an example's input changes
the distribution of two bits by a factor p(1 − q) / (q(1 − p)) = e^ε, so each report is ε-LDP.
Under unit client each example reports at ε/L and every client sends exactly L reports: a client
with fewer examples pads with empty reports (an all-zero one-hot, randomised like any other), so
neither the server nor the release learns how many examples a client holds. An empty report
differs from a real one in one bit, by a factor p/q = (e^ε + 1)/2 ≤ e^ε, so the padding keeps
every report ε/L-LDP, and the decoding (which counts every report, real or empty) stays unbiased.

A `fedeval.privacy.base.ReleaseModel`: this module states the report ε and the claim
(`fedeval.privacy.mechanism.Mechanism` reads them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from fedeval.core.config import ModelTraits, PrivacyConfig, PrivacyModel, Unit
from fedeval.core.errors import UsageError
from fedeval.core.hierarchy import coarsen, consistent_leaves, monotone_cumulative
from fedeval.core.release import Probe, Release, ScoreHistogram, level_offsets
from fedeval.privacy import report_split
from fedeval.privacy.base import CLASSES, ClientBatch, SavedCounts, counts_public, first_cell
from fedeval.privacy.events import DpEvent, PureEvent
from fedeval.privacy.noise import LevelReports, oue_probabilities, oue_sparse, oue_sum

if TYPE_CHECKING:
    from fedeval.privacy.mechanism import Mechanism

TRAITS = ModelTraits(PrivacyModel.LOCALDP, adds_noise=True, masked=False, shares_noise=False)
"""Each report is private by itself (OUE), so reports travel without masks, one per example;
no noise is shared between clients."""


# --- the numbers the claim is made of ---------------------------------------------------------


def _total_epsilon(config: PrivacyConfig) -> float:
    """ε of the release (PrivacyConfig has checked that localdp carries one)."""
    if config.epsilon is None:
        raise AssertionError("localdp configuration without epsilon")
    return config.epsilon


def sensitivity(config: PrivacyConfig) -> None:
    return None


def tree_epsilon(config: PrivacyConfig) -> float:
    """ε of the tree: the whole ε (a probe takes reports, not ε: parallel composition)."""
    return _total_epsilon(config)


def count_alpha(config: PrivacyConfig) -> None:
    return None


def oue_epsilon(config: PrivacyConfig) -> float:
    """ε of one OUE report: ε, or ε/L when a client's L reports share it."""
    return tree_epsilon(config) / config.examples_per_unit


def probe_epsilon(config: PrivacyConfig) -> float | None:
    """Each probe report's ε: the report ε (probe and tree reports are disjoint)."""
    return oue_epsilon(config) if config.probed else None


def probe_sensitivity(config: PrivacyConfig) -> None:
    return None


def sampler_delta(mech: Mechanism) -> None:
    return None


# --- the claim ---------------------------------------------------------------------------------


def parameters(mech: Mechanism) -> dict[str, Any]:
    cfg = mech.config
    p, q = oue_probabilities(oue_epsilon(cfg))
    return {
        "name": "Optimal Unary Encoding",
        "p": p,
        "q": q,
        "epsilon_per_report": mech.report_epsilon,
        "domain": "label × cell of one level",
        "levels_per_example": 1,
        **report_split.assignment_parameters(cfg),
        "reports_per_client": f"exactly {cfg.max_examples} (empty reports pad a "
        "client with fewer examples)"
        if cfg.unit is Unit.CLIENT
        else "one per example",
    }


def probe_parameters(mech: Mechanism) -> dict[str, Any]:
    cfg = mech.config
    p, q = oue_probabilities(oue_epsilon(cfg))
    return {
        "name": "Optimal Unary Encoding of (label, probe cell)",
        "epsilon_per_report": oue_epsilon(cfg),
        "p": p,
        "q": q,
        "domain": f"label × cell: {2 * mech.probe_cells} bits, one set per real probe report",
        "report_share": "each report (padding too) is a probe report with probability "
        f"{cfg.probe_share:g}, drawn before any data is read; the others go to the tree",
        "composition": "parallel: every report is one probe or one tree report, so each "
        "unit's reports compose to ε as without a probe",
    }


def event(mech: Mechanism) -> DpEvent:
    """Pure ε-DP: each unit's reports compose to ε (each of them ε/L-LDP)."""
    return PureEvent(_total_epsilon(mech.config))


def claim(mech: Mechanism) -> str:
    cfg = mech.config
    eps = cfg.epsilon
    probe = (
        f"; a share {cfg.probe_share:g} of the reports, drawn at random before any "
        f"data is read, report their label and cell among {mech.probe_cells} (the "
        "probe that chose the height), "
        "the others a level of the tree: each report is still sent once"
        if cfg.probed
        else ""
    )
    bits = report_split.claim_words(cfg) + (
        "; the bits are drawn in 53-bit floating point (a uniform against p for "
        "the report's own bit, numpy's binomial sampler for how many others turn "
        "on) and taken as exact: p and q hold only to within floating-point "
        "rounding, which this ε does not account for"
    )
    if cfg.unit is Unit.CLIENT:
        return (
            f"pure {eps:g}-local DP (δ = 0) for each client: exactly "
            f"{cfg.max_examples} reports at ε/{cfg.max_examples} each compose to "
            f"{eps:g}; the release is {eps:g}-DP under replacing one client's data "
            f"(the number of clients is public){probe}{bits}{mech._what_decides()}"
        )
    return (
        f"pure {eps:g}-local DP (δ = 0) for each example's report; the release is "
        f"{eps:g}-DP under replacing one example's data (the number of examples "
        f"and each client's number of examples are public){probe}{bits}"
        f"{mech._what_decides()}"
    )


def server_learns(mech: Mechanism) -> str:
    cfg = mech.config
    per = (
        f"exactly {cfg.max_examples} reports per client"
        if cfg.unit is Unit.CLIENT
        else "one report per example (so each client's number of examples)"
    )
    text = (
        f"which clients take part and every randomised report, each "
        f"{mech.report_epsilon:g}-local DP; {per}"
    )
    if cfg.probed:
        text += "; which reports are probe reports (drawn before any data is read)"
    return text


def error_rates() -> tuple[str, str]:
    """The papers' error rates (Table 1) of P/R/A and the AUC, for orientation."""
    return ("ε^(-2/3)·n^(-1/3)", "h/(ε·√n)")


def binning_buckets(n: float, epsilon: float | None) -> float:
    """B for histogram binning before rounding and clamping: ε^{1/2} n^{1/4} under OUE
    (Cormode & Markov, section 5)."""
    if epsilon is None:
        raise UsageError("localdp needs its `epsilon` to choose the buckets.")
    return float(math.sqrt(epsilon) * n**0.25)


def probe_words(config: PrivacyConfig) -> str:
    """What the probe of a two-phase `auto` takes, in words."""
    return (
        f"{config.probe_share:g} of the reports report the label alone (the class totals "
        "that choose h); the tree gets the rest"
    )


def report_bytes(config: PrivacyConfig) -> float:
    """Payload one client sends per report: one level's OUE bits (2·2^k, packed into whole
    bytes) and the level's index, averaged over the levels as they are drawn (one such report
    per example)."""
    sizes = [1 + ((2 << k) + 7) // 8 for k in config.levels]
    if not config.level_split:
        return float(np.mean(sizes))
    return float(np.dot(sizes, report_split.level_probabilities(config)))


def batch_width(config: PrivacyConfig) -> int:
    """Entries one client's reports hold, for sizing batches of clients: its node vector, or
    its (at most L) reports' bits at the finest level."""
    return max(int(level_offsets(config)[-1]), config.examples_per_unit * (2 << config.height))


def check_counts(saved: SavedCounts, fail: Callable[[str], Exception]) -> None:
    """What OUE sums must satisfy (`fedeval.documents.consistency`): the reports per level stated,
    every bit count within [0, that level's reports], and under unit client clients × L reports
    in all (the probe's included)."""
    config, levels, reporters = saved.config, saved.levels, saved.reporters
    n_clients = saved.n_clients
    probe = saved.probe
    if reporters is None:
        raise fail("a localdp release must state its number of reports per level")
    # A two-phase release: the probe's reports are some of every client's L report slots.
    probe_reports = 0
    if probe is not None:
        probe_reports = int(probe.reports or 0)
        bits = np.asarray(probe.counts)
        if np.any((bits < 0) | (bits > probe_reports)):
            raise fail(
                f"the probe counts {bits.tolist()} set bits, outside [0, {probe_reports}] for "
                f"its {probe_reports} reports"
            )
    for k, lv, n in zip(config.levels, levels, reporters, strict=True):
        n = int(n)
        bad = (lv < 0) | (lv > n)
        if np.any(bad):
            c, j = first_cell(bad)
            raise fail(
                f"level {k}, {CLASSES[c]}, cell {j} counts {int(lv[c, j])} set bits, outside "
                f"[0, {n}] for the {n} reports of that level"
            )
    if config.unit is Unit.CLIENT and n_clients is not None:
        expected = int(n_clients) * config.examples_per_unit
        sent = int(reporters.sum()) + probe_reports
        if sent != expected:
            raise fail(
                f"{sent} reports from {n_clients} clients, but under unit client every client "
                f"sends exactly {config.max_examples} ({expected} in all)"
            )


# --- the pipeline ------------------------------------------------------------------------------


def report_epsilon(config: PrivacyConfig) -> float:
    """ε of one example's report: the whole ε, or ε/L when a client's L reports share it (the
    claim's: `oue_epsilon`)."""
    if config.model is not TRAITS.model or config.epsilon is None:
        raise ValueError("a local-DP configuration needs ε")
    return oue_epsilon(config)


MAX_REPORTS = 1 << 26
"""Reports the per-client path materialises at once (padding included)."""


def empty_reports(n_examples: int, n_clients: int, config: PrivacyConfig, taken: int = 0) -> int:
    """How many empty reports pad the clients' real ones: n_clients·L − examples under unit
    client (every client sends exactly L), none under unit example; less the `taken` report
    slots of these clients that a probe round already used (their real examples left out of
    `n_examples`)."""
    if config.unit is not Unit.CLIENT:
        return 0
    pad = n_clients * int(config.max_examples or 0) - n_examples - taken
    if pad < 0:
        raise UsageError(
            f"{n_examples} examples from {n_clients} clients exceed the cap of "
            f"{config.max_examples} per client; cap them first "
            "(fedeval.tables.scored.cap_examples)."
        )
    return pad


def draw(
    leaf_counts: np.ndarray,
    n_clients: int,
    config: PrivacyConfig,
    rng: np.random.Generator,
    *,
    pad: int | None = None,
    probe: Probe | None = None,
) -> Release:
    """Split reports over the levels (multinomial per cell at the levels' probabilities,
    `report_split`; empty reports too), then Binomial sums of OUE bits. After a probe round,
    `leaf_counts` and `pad` are the reports it left."""
    levels = config.levels
    g = len(levels)
    probs = report_split.level_probabilities(config)  # 1/g each without a split
    if g == 1:
        split = leaf_counts[..., None]
    else:
        split = rng.multinomial(leaf_counts, probs)  # (2, L, g)
    if pad is None:
        pad = empty_reports(int(leaf_counts.sum()), n_clients, config)
    pad_split = rng.multinomial(pad, probs) if g > 1 else np.array([pad])
    parts, reporters = [], []
    for i, k in enumerate(levels):
        true_k = coarsen(split[..., i], k)  # (2, 2^k)
        n_k = int(split[..., i].sum()) + int(pad_split[i])
        parts.append(oue_sum(true_k, n_k, report_epsilon(config), rng).ravel())
        reporters.append(n_k)
    return Release.of_cohort(
        config,
        np.concatenate(parts),
        np.asarray(reporters, np.int64),
        n_clients,
        probe,
        clients_public=counts_public(config),
    )


def padded(
    cells: np.ndarray,
    labels: np.ndarray,
    client: np.ndarray,
    n_clients: int,
    config: PrivacyConfig,
    taken: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every report clients send: their examples and empty reports so that each client sends
    exactly L under unit client (less the `taken` slots per client a probe round used), in
    client order, a client's real reports in their order first. Returns (cells, labels,
    client, real), `real` False on padding."""
    used = 0 if taken is None else int(taken.sum())
    pad = empty_reports(len(cells), n_clients, config, used)
    if len(cells) + pad > MAX_REPORTS:
        raise UsageError(
            f"{n_clients:,} clients sending {config.max_examples:,} reports each is "
            f"{len(cells) + pad:,} reports in one batch, too many to materialise one by one; "
            "lower --max-examples, or drop --per-client (the fast path draws their sum)."
        )
    real = np.ones(len(cells), bool)
    if pad == 0:
        return cells, labels, client, real
    per_client = np.bincount(client, minlength=n_clients)
    if taken is not None:
        per_client = per_client + taken
    extra = np.repeat(np.arange(n_clients), int(config.max_examples or 0) - per_client)
    # In client order, each client's empty reports after its own real ones (a stable sort):
    # appended after every client's real reports, their place in the encoder's rows would
    # tell the server which reports are empty, so how many examples a client holds.
    all_client = np.concatenate([client, extra.astype(client.dtype)])
    order = np.argsort(all_client, kind="stable")
    return (
        np.concatenate([cells, np.zeros(len(extra), cells.dtype)])[order],
        np.concatenate([labels, np.zeros(len(extra), labels.dtype)])[order],
        all_client[order],
        np.concatenate([real, np.zeros(len(extra), bool)])[order],
    )


def sparse_reports(
    cells: np.ndarray,
    labels: np.ndarray,
    config: PrivacyConfig,
    rng: np.random.Generator,
    real: np.ndarray | None = None,
) -> tuple[np.ndarray, list[LevelReports]]:
    """What every report says: the index of its level (drawn before and independently of its
    data, `report_split.draw_levels`), and per level i the OUE reports (`oue_sparse`) of the
    reports that chose it, in their order. A report that is not `real` (padding) randomises
    the all-zero vector."""
    levels = config.levels
    h = config.height
    group = report_split.draw_levels(len(cells), config, rng)
    # Every report's column at its own level, then the reports grouped by level in their order
    # (a stable sort of the small level index): one gather instead of a mask per level.
    kk = np.asarray(levels, np.int64)[group]
    cols = (np.asarray(labels).astype(np.int64) << kk) + (np.asarray(cells, np.int64) >> (h - kk))
    order = np.argsort(group.astype(np.uint8), kind="stable")
    starts = np.cumsum(np.bincount(group, minlength=len(levels)))[:-1]
    by_level = np.split(cols[order], starts)
    on_level = [None] * len(levels) if real is None else np.split(real[order], starts)
    out = [
        oue_sparse(c, 2 << k, report_epsilon(config), rng, on)
        for k, c, on in zip(levels, by_level, on_level, strict=True)
    ]
    return group, out


def example_reports(
    cells: np.ndarray,
    labels: np.ndarray,
    config: PrivacyConfig,
    rng: np.random.Generator,
    real: np.ndarray | None = None,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """`sparse_reports` with each level's OUE bits dense, (m_i, 2·2^k) bool: the same draws,
    so the same reports."""
    group, levels = sparse_reports(cells, labels, config, rng, real)
    return group, [r.dense() for r in levels]


def client_reports(
    rows: ClientBatch, config: PrivacyConfig, cohort_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Per report: pick a level, one-hot its (label, cell), randomise every bit; sum per client.
    `rows.taken`: report slots per client a probe round used (they are not padded again).

    Returns (reports (n_clients, D), reports per client and level (n_clients, levels))."""
    off = level_offsets(config)
    n_clients = rows.n_clients
    cells, labels, client, real = padded(*rows.arrays(), config, rows.taken)
    group, levels = sparse_reports(cells, labels, config, rng, real)
    reports = np.zeros((n_clients, int(off[-1])), np.int64)
    reporters = np.zeros((n_clients, len(config.levels)), np.int64)
    for i, r in enumerate(levels):
        who = client[group == i]
        # Each set bit counted at (its report's client, its column).
        at = np.concatenate(
            [who[r.flip_rows] * r.width + r.flip_cols, (who * r.width + r.cols)[r.kept]]
        )
        sums = np.bincount(at, minlength=n_clients * r.width).reshape(n_clients, r.width)
        reports[:, off[i] : off[i + 1]] = sums
        reporters[:, i] = np.bincount(who, minlength=n_clients)
    return reports, reporters


def chunk_sum(
    rows: ClientBatch, config: PrivacyConfig, cohort_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The sum of `client_reports` over the clients: every report's OUE bits drawn from the
    generator exactly as they are (sparse), summed per bit without the (n_clients, D)
    per-client sums; and the reports per level."""
    cells, labels, _, real = padded(*rows.arrays(), config, rows.taken)
    group, levels = sparse_reports(cells, labels, config, rng, real)
    total = np.concatenate([r.column_sums() for r in levels])
    return total, np.bincount(group, minlength=len(config.levels)).astype(np.int64)


def cell_variance(
    n_total: int, n_k: int, counts: np.ndarray | float, epsilon: float
) -> np.ndarray | float:
    """Variance of decoded level-k counts whose true values are `counts`: OUE noise
    n_k·q(1−q) + c·(p(1−p) − q(1−q)) over (p − q)², rescaled by (n/n_k)², plus the sampling
    error of estimating a count c from the n_k/n of examples that report level k."""
    p, q = oue_probabilities(epsilon)
    if n_k == 0:
        return np.full(np.shape(counts), np.inf) if np.ndim(counts) else float("inf")
    scale = n_total / n_k
    oue = (n_k * q * (1 - q) + (counts / scale) * (p * (1 - p) - q * (1 - q))) / (p - q) ** 2
    return scale**2 * oue + counts * (scale - 1.0)


def level_variance(n_total: int, n_k: int, k: int, epsilon: float) -> float:
    """Approximate variance of one decoded level-k count, assuming equal mass per cell
    (`cell_variance` at n/2^(k+1)): the weight of a level before the cells' counts are known."""
    return float(cell_variance(n_total, n_k, n_total / (2 << k), epsilon))


def pooled_level(
    levels: tuple[int, ...], probe_level: int | None, probe_reports: int
) -> int | None:
    """The index in `levels` of the level the probe's reports measure, where the tree releases
    that level too, else None.

    A probe report is the OUE, at the report ε, of the example's (label, cell) at the probe
    level of the same score axis, which is exactly what a tree report of that level is; the
    reports are disjoint and each is drawn at random before any data is read (parallel
    composition, `fedeval.privacy.probe`). Their bits summed with that level's are therefore that
    level measured from its reporters and the probe's together, and decoding the pooled sum is
    post-processing of the release. Without the pooling the probe's reports (a share
    `probe_share` of all) would inform the height only."""
    if probe_reports <= 0 or probe_level is None or probe_level not in levels:
        return None
    return levels.index(probe_level)


def pooled_counts(release: Release) -> tuple[list[np.ndarray], np.ndarray]:
    """The level counts and reporters per level with the probe's bits and reports added to the
    level it measures (`pooled_level`)."""
    counts = release.level_counts()
    reporters = np.asarray(release.reporters, dtype=np.int64).copy()
    probe = release.probe
    level = pooled_level(
        tuple(release.config.levels),
        None if probe is None else probe.cells.bit_length() - 1,
        release.probe_reports,
    )
    if level is not None and probe is not None:
        counts[level] = counts[level] + probe.histogram
        reporters[level] += release.probe_reports
    return counts, reporters


def decode(release: Release) -> tuple[list[np.ndarray], list[float | np.ndarray]]:
    """Unbiased level estimates and the variance of each of their cells.

    A decoded count's variance grows with the count (the sampling error, and OUE's 1-bits), so
    a level has no single variance: a sparse cell (the few negatives above a high threshold)
    is measured far better than the level's mean cell. The cells' variances are taken at the
    counts a first consistency pass (one weight per level, `level_variance`) estimates, and the
    consistency step weighs every cell by its own. Measured (benchmarks/hard.py, ε = 5, 400
    releases), median errors against one weight per level: 1.5% positives at 1M rows,
    precision 4.6e-2 → 3.9e-2, recall 3.4e-2 → 3.1e-2, AP 3.0e-2 → 2.7e-2; smooth scores
    (unequal clients) at 300k, AUC 1.02e-3 → 8.7e-4; coverage unchanged within its noise,
    intervals 5–10% narrower. The weights are post-processing of the release."""
    eps = report_epsilon(release.config)
    p, q = oue_probabilities(eps)
    level_counts, reporters = pooled_counts(release)
    n_total = release.total_reports  # the probe's reports too: counts estimate everyone
    levels = release.config.levels
    measured: list[np.ndarray] = []
    variances: list[float | np.ndarray] = []
    for c, n_k, k in zip(level_counts, reporters, levels, strict=True):
        if n_k == 0:
            measured.append(np.zeros(c.shape))
        else:
            measured.append((c - n_k * q) / (p - q) * (n_total / n_k))
        variances.append(level_variance(n_total, int(n_k), k, eps))
    if len(levels) == 1:
        return measured, variances
    first = np.stack(
        [consistent_leaves([m[c] for m in measured], variances, levels) for c in (0, 1)]
    )
    counts = np.clip(first, 0.0, n_total)
    return measured, [
        cell_variance(n_total, int(n_k), coarsen(counts, k), eps)
        for n_k, k in zip(reporters, levels, strict=True)
    ]


JOINT_SAMPLING_CELLS = 1 << 24
"""Draws × leaves × levels up to which the level sampling is redrawn jointly (larger trees take
each level's sampling variance alone, a slight overestimate of prefix-sum variances)."""


def measurement_noise(
    hist: ScoreHistogram, n_draws: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Fresh noise of each decoded count, per level (n_draws, 2, 2^k).

    Every part of a decoded count's covariance is linear in the true leaf counts c (OUE's, Wang
    et al. 2017 eq. 9, `cell_variance`; the multinomial sampling's, across levels too), so it is
    estimated without bias at the unclamped consistent leaves ĉ. Sampling: each example reports
    one level, chosen at random with the levels' probabilities π_k (1/g each without a split,
    `report_split`), so a level-k count is estimated from about π_k of the examples;
    the choice is redrawn jointly over the levels (an example that reports one level reports no
    other: the levels' errors of a cell covary by −c, and range queries that combine levels are
    less variable than independent draws would make them). It needs counts ≥ 0: the monotone
    fit's leaves (`monotone_cumulative`: least squares on the prefix sums, so its range sums
    stay close to ĉ's; it is ĉ itself where no leaf is near empty, and the jointly drawn noise
    is then as before). Clamped at 0 they would not: their excess, the positive half of each
    empty leaf's noise, sums over a coarse cell to thousands of phantom examples whose −c
    covariance between levels, absent from the release (its empty cells' noise is independent
    OUE), made the draws' variance of range sums 10–30% short even with each cell's variance at
    ĉ (sums of 32–208 empty leaves, 100k rows, ε = 5, h = 8). OUE: normal at ĉ (a rescaled sum
    of many independent bits is close to normal), plus the sampling variance of ĉ less that of
    the fit, so each cell's variance is the unbiased V(ĉ) (clamped at 0).
    """
    p, q = oue_probabilities(report_epsilon(hist.config))
    n_total = float(hist.total_reports)
    levels = list(hist.config.levels)
    g = len(levels)
    tree = 1.0 - hist.config.probe_share  # a report's chance of each level: of the tree's
    split = hist.config.level_split  # share 1/g each, or the split's (`report_split`)
    share = tree * report_split.level_probabilities(hist.config) if split else np.full(g, tree / g)
    raw = np.minimum(hist.leaves, n_total)  # unbiased estimates of the true counts, (2, L)
    leaves = np.clip(np.diff(monotone_cumulative(raw), axis=-1), 0.0, n_total)  # ≥ 0
    pooled = pooled_level(tuple(levels), hist.probe_level, hist.probe_reports)
    reporters = list(hist.reporters)
    share_of = share.copy()  # a report's chance of measuring each level
    if pooled is not None:  # the probe's reports measure this level too (`pooled_level`)
        reporters[pooled] += hist.probe_reports
        share_of[pooled] += hist.config.probe_share
    pvals = share_of
    if hist.config.probed and pooled is None:  # the probe's reports: in no level
        pvals = np.append(share_of, hist.config.probe_share)
    joint = None
    if g > 1 and n_draws * leaves.size * g <= JOINT_SAMPLING_CELLS:
        counts = np.broadcast_to(np.rint(leaves).astype(np.int64), (n_draws, *leaves.shape))
        joint = rng.multinomial(counts, pvals)[..., :g]  # (n_draws, 2, L, g)
    out = []
    for i, (k, n_k) in enumerate(zip(levels, reporters, strict=True)):
        c, fit = coarsen(raw, k), coarsen(leaves, k)
        scale = n_total / n_k if n_k else 0.0
        c_k = np.minimum(c / scale, n_k) if n_k else c * 0
        oue = (c_k * p * (1 - p) + (n_k - c_k) * q * (1 - q)) / (p - q) ** 2
        sampling = max(scale - 1.0, 0.0)  # per example (`cell_variance`)
        if joint is not None and n_k:  # the fit's sampling drawn below, ĉ's less it here
            var = scale**2 * oue + (c - fit) * sampling
        else:  # each level's sampling alone, at ĉ
            var = scale**2 * oue + c * sampling
        noise = rng.standard_normal((n_draws, 2, 1 << k)) * np.sqrt(np.maximum(var, 0.0))
        if joint is not None and n_k:
            chosen = coarsen(joint[..., i].astype(np.float64), k)
            expected = coarsen(np.rint(leaves), k) * share_of[i]
            noise += scale * (chosen - expected)
        out.append(noise)
    return out
