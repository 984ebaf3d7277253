"""The heights `--height auto` chooses from many probes at once, for the audit's two-phase trials.

`fedeval.privacy.probe.height` reads one released probe at a time; the audit draws thousands
of probes per scenario, and reading each alone was most of its time (about 3.5 ms a probe:
32 re-noised copies, 7 levels, Python loops over steps and heights). `heights` is the same
computation over a stack of probes (T, 2·C): `fedeval.core.height_choice.discretisation`,
`choose_height` and `fedeval.privacy.probe.choice_from_histogram` step by step, with a leading
trial axis, the same re-noising draws (a fresh `default_rng(0)` shared by every probe, as each
single call makes) and the same floating-point operations in the same order, so the same
heights. The deployed function stays the reference: the audit reads some trials of every run
through it (`fedeval.audit.scenarios`) and tests/audit/test_fast_statistics.py checks that
both give the same heights on every probe of several scenarios.
"""

from __future__ import annotations

import numpy as np

from fedeval.core import height_choice as hc
from fedeval.core.config import HEIGHT_METRICS, PrivacyConfig, check_height_for
from fedeval.core.params import AUTO_MAX_HEIGHT, AUTO_MIN_HEIGHT, probe_epsilon_per_example
from fedeval.core.params import probe_height as totals_height
from fedeval.core.release import Probe
from fedeval.privacy import probe as probe_round


def histograms(
    probes: list[Probe], config: PrivacyConfig, total_reports: int
) -> tuple[np.ndarray, np.ndarray]:
    """(counts, variance), each (T, 2, C): `fedeval.privacy.probe.histogram` of each probe."""
    pairs = [probe_round.histogram(p, config, total_reports) for p in probes]
    return np.stack([c for c, _ in pairs]), np.stack([v for _, v in pairs])


CHUNK = 64
"""Probes read together: their re-noised copies (64 × 33 × 2·2^k) stay in the CPU's cache
(0.4 ms a probe at 64, 0.9 ms at 2,000 together, 2–3 ms one at a time)."""


def heights(
    probes: list[Probe], config: PrivacyConfig, total_reports: int, min_height: int, max_height: int
) -> np.ndarray:
    """`fedeval.privacy.probe.height(p, config, total_reports, min_height, max_height)` for every
    probe p of `probes`: (T,) int64."""
    lo = max(AUTO_MIN_HEIGHT[config.model], min_height)
    hi = min(max(AUTO_MAX_HEIGHT[config.model], lo), max_height)
    lo = min(lo, hi)
    candidates = np.arange(lo, hi + 1)
    # A function of public settings only: once for all the probes (not cached across calls,
    # so a mechanism patched by a broken-on-purpose audit cannot leave its value behind).
    sd = probe_round.count_sd(config, candidates, total_reports)
    chunks = [
        _heights(probes[i : i + CHUNK], config, total_reports, candidates, sd)
        for i in range(0, len(probes), CHUNK)
    ]
    return np.concatenate([np.zeros(0, np.int64), *chunks])


def _heights(
    probes: list[Probe],
    config: PrivacyConfig,
    total_reports: int,
    candidates: np.ndarray,
    sd: np.ndarray,
) -> np.ndarray:
    hist, variance = histograms(probes, config, total_reports)
    lo, hi = int(candidates[0]), int(candidates[-1])
    chosen, with_auc = _choose(hist, variance, candidates, sd, config)
    # choice_from_histogram: the AUC's smooth-data height from the class totals as a floor.
    out = chosen.copy()
    eps = probe_epsilon_per_example(config)
    sums = hist.sum(axis=-1)
    for t in np.flatnonzero(with_auc).tolist():
        neg, pos = (max(float(x), 0.0) for x in sums[t])
        smooth = totals_height(
            config.model, negatives=neg, positives=pos, epsilon=eps, reports=total_reports,
            min_height=lo,
        )  # fmt: skip
        out[t] = int(min(max(int(chosen[t]), smooth), hi))
    return out


def _choose(
    hist: np.ndarray,
    variance: np.ndarray,
    candidates: np.ndarray,
    count_sd: np.ndarray,
    config: PrivacyConfig,
) -> tuple[np.ndarray, np.ndarray]:
    """`choose_height` per probe: (heights (T,), whether the metrics chosen for include the AUC)."""
    hist = np.asarray(hist, dtype=np.float64)
    # (H,), or (3, H) per metric for a split tree (`fedeval.privacy.probe.count_sd`)
    sd = np.broadcast_to(np.asarray(count_sd, np.float64), (3, len(candidates)))
    sums = np.maximum(hist.sum(axis=-1), 1.0)  # (T, 2): max(float(t), 1.0) per class
    neg, pos = sums[:, 0:1], sums[:, 1:2]
    k_auc, k_ap = hc.NOISE_SCALE[config.model.value]
    noise = np.stack(
        [
            k_auc * sd[0] * np.sqrt(1.0 / pos**2 + 1.0 / neg**2),
            k_ap * sd[1] / pos,
            sd[2] / np.minimum(pos, neg),
        ],
        axis=1,
    )  # (T, 3, H)
    bias = np.zeros_like(noise)
    bias[:, :2] = _discretisation(hist, variance, candidates)
    wanted = check_height_for(config.height_for) or HEIGHT_METRICS
    rows = [HEIGHT_METRICS.index(m) for m in wanted]
    fallback = np.isnan(bias[:, rows]).all(axis=(1, 2))  # then all three metrics
    err = np.hypot(noise, bias)
    best = err.min(axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(best > 0, err / np.where(best > 0, best, 1.0), 1.0)
        logs = np.log(ratio)
    score = np.where(fallback[:, None], logs.mean(axis=1), logs[:, rows].mean(axis=1))  # (T, H)
    score = np.nan_to_num(score, nan=np.inf)
    low = score.min(axis=1)
    hits = score <= low[:, None] + 1e-12
    last = hits.shape[1] - 1 - np.argmax(hits[:, ::-1], axis=1)
    j = np.where(np.isfinite(low), last, 0)
    with_auc = fallback | ("auc" in wanted)
    return candidates[j].astype(np.int64), with_auc


def _discretisation(hist: np.ndarray, variance: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """`fedeval.core.height_choice.discretisation` per probe: (T, 2, H)."""
    t_count, _, cells = hist.shape
    k = int(np.log2(cells))
    rng = np.random.default_rng(0)
    variance = np.broadcast_to(np.asarray(variance, np.float64), hist.shape)
    sd = np.sqrt(np.where(np.isfinite(variance), variance, 0.0))
    silent = ~np.isfinite(variance).all(axis=(1, 2))
    hist = np.where(silent[:, None, None], 0.0, hist)
    noise = rng.standard_normal((hc.STEP_DRAWS, *hist.shape[1:]))
    copies = hist[:, None] + sd[:, None] * noise[None]
    values = hc.level_values(np.concatenate([hist[:, None], copies], axis=1), sd[:, None])
    # values: (2, T, 1 + R, k + 1)
    steps, steps_most = hc.significant(np.diff(values, axis=-1), k)  # (2, T, k)
    direct, direct_most = hc.significant(values[..., -1:] - values, k)  # (2, T, k + 1)
    top = max(int(np.max(candidates)), k) + 1
    occupied = np.array([hc.occupied_cells(hist[t], sd[t]) for t in range(t_count)])
    filled = occupied[:, None] * 2.0 ** (np.arange(k, top) - k)
    spread = occupied >= hc.SPREAD_SHARE * cells
    rates = np.where((filled < hc.SMOOTH_CELLS) & ~spread[:, None], hc.SLOWEST_RATE, hc.SMOOTH_RATE)
    divided = occupied[:, None] * 2.0 ** (np.arange(k + 1) - k) >= hc.DIVIDED_CELLS
    out = np.zeros((t_count, 2, len(candidates)))
    for i in range(2):
        cap = np.where(divided[:, 1:], steps_most[i], np.inf)
        last = np.zeros(t_count)
        for j in range(k):
            last = np.maximum(steps[i, :, j], np.minimum(hc.SMOOTH_RATE * last, cap[:, j]))
        beyond = last[:, None] * np.cumprod(rates, axis=1)
        tail = np.cumsum(beyond[:, ::-1], axis=1)[:, ::-1]
        for j, h in enumerate(candidates.tolist()):
            out[:, i, j] = tail[:, h - k] if h >= k else direct[i, :, h] + tail[:, 0]
        for j in range(len(candidates) - 2, -1, -1):
            h = int(candidates[j])
            if h < k:
                most = np.where(divided[:, h], direct_most[i, :, h] + tail[:, 0], np.inf)
            else:
                most = np.full(t_count, np.inf)
            out[:, i, j] = np.maximum(
                out[:, i, j], np.minimum(out[:, i, j + 1] / hc.SLOWEST_RATE, most)
            )
    for t in np.flatnonzero(occupied < hc.ONE_CELL).tolist():  # data the probe holds in a cell
        out[t, 0] = np.maximum(
            out[t, 0], hc.unresolved_floor(hist[t], sd[t], candidates, occupied[t])
        )
    unreadable = np.isnan(values[:, :, 0]).all(axis=-1)  # (2, T)
    out[unreadable.T] = np.nan
    return out
