"""Figures of a release's estimates: ROC and PR curves, and reliability diagrams.

matplotlib is optional (``pip install 'fedeval[plot]'``) and imported only when a figure is drawn.
Figures are built on `matplotlib.figure.Figure` directly, never through pyplot, so drawing needs
no display, and neither changes nor depends on the caller's pyplot backend or open figures.
Files are written atomically: a failure leaves no file behind.

>>> import numpy as np, fedeval.views.plots
>>> from fedeval.api.curves import roc_pr_curves
>>> rng = np.random.default_rng(0)
>>> y = rng.integers(0, 2, 5_000); s = np.clip(0.3 * y + 0.7 * rng.random(5_000), 0, 1)
>>> fedeval.views.plots.plot_curves(roc_pr_curves(y, s, seed=0), "curves.png")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fedeval.core.errors import UsageError
from fedeval.privacy.registry import model_of
from fedeval.tables.write import atomic_output

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import LegendLocType, RcKeyType

    from fedeval.api.calibrate import CalibrationResult
    from fedeval.api.curves import CurveResult
    from fedeval.core.results import Estimate
    from fedeval.estimate.roc_pr import Curves
    from fedeval.protocol.simulate import Simulated

FORMATS = {".png": "png", ".svg": "svg"}
"""Output suffix → matplotlib format."""

PNG_DPI = 150
MISSING = "plotting needs matplotlib: pip install matplotlib (or fedeval's 'plot' extra)"

# Colour-blind-safe (tab:blue / tab:orange are distinguishable under the common deficiencies;
# the exact curve is black and dashed, so it never relies on colour alone).
ESTIMATE = "tab:blue"
RAW = "tab:orange"
KNOT = "#08306b"  # a dark blue: the quantile knots read as ticks along the estimate
EXACT = "black"
GUIDE = "0.6"
MARGIN = 0.02
MAX_LINE_POINTS = 2000
"""An exact curve (one point per distinct score) is thinned to about this many points."""


def describe_setting(run: Simulated, *details: str) -> str:
    """The privacy setting in one line, e.g.
    'distdp, ε = 1 · hierarchy h = 9 · Q = 100 · 200,000 examples'; `details` go before the size.
    """
    cfg = run.config
    head = cfg.model.value
    if model_of(cfg.model).TRAITS.adds_noise and cfg.epsilon is not None:
        head += f", ε = {cfg.epsilon:g}"
    if run.rows is None or (run.truth is None and not run.mechanism.examples_public):
        # Only a simulation that shows exact values may show the exact size (the release and
        # everything made from it alone hold none under add-remove).
        size = f"≈ {run.examples_estimate:,.0f} examples (noisy estimate)"
    else:
        size = f"{run.rows:,} examples"
        if run.clients is not None and run.clients != run.rows and run.truth is not None:
            size += f", {run.clients:,} clients"
    return " · ".join([head, f"{cfg.shape.value} h = {cfg.height}", *details, size])


# --------------------------------------------------------------------------------------------
# ROC and PR curves


def curves_figure(result: CurveResult) -> Figure:
    """ROC (left) and PR (right) of `result` as a matplotlib Figure (see `plot_curves`)."""
    fig = _figure_class()(figsize=(10, 4.8), layout="constrained")
    roc, pr = fig.subplots(1, 2)
    est, exact = result.dense, result.exact
    hist = result.run.histogram
    total = hist.positives + hist.negatives
    prevalence = hist.positives / total if total > 0 else float("nan")

    # ROC
    roc.plot([0, 1], [0, 1], color=GUIDE, lw=1, ls=":", label="chance (AUC 0.5)", zorder=1)
    if exact is not None:
        x, y = _thin(exact.fpr, exact.tpr)
        roc.plot(
            x, y, color=EXACT, lw=1, ls="--", label=f"exact (AUC {exact.roc_auc:.4f})", zorder=2
        )
    roc.plot(
        est.fpr, est.tpr, color=ESTIMATE, lw=2, label=f"estimate (AUC {est.roc_auc:.4f})", zorder=3
    )
    roc.plot(*_knots(result.points, roc=True), **_KNOT_STYLE)
    _style(roc, "ROC curve", "False positive rate", "True positive rate (recall)")
    _legend(roc, "lower right", result.roc_area_error)

    # PR: precision is undefined where nothing is predicted positive (it is 1 there by
    # convention), so those points are left out.
    pr.axhline(prevalence, color=GUIDE, lw=1, ls=":", label=f"prevalence ({prevalence:.3f})")
    if exact is not None:
        x, y = _thin(*_pr(exact))
        pr.plot(x, y, color=EXACT, lw=1, ls="--", label=f"exact (AP {exact.average_precision:.4f})")
    pr.plot(
        *_pr(est),
        color=ESTIMATE,
        lw=2,
        label=f"estimate (AP {est.average_precision:.4f})",
    )
    pr.plot(*_knots(result.points, roc=False), **_KNOT_STYLE)
    _style(pr, "Precision–recall curve", "Recall", "Precision")
    _legend(pr, "best", result.pr_area_error)

    fig.suptitle(describe_setting(result.run, f"Q = {result.quantiles}"), fontsize=11)
    return fig


def plot_curves(result: CurveResult, path: str | os.PathLike[str]) -> None:
    """Write the ROC and PR curves of one release to `path` (.png or .svg).

    The estimated curve (solid, with its quantile knots as dots) is drawn over the exact one
    (dashed, in simulation); legends give the areas, and the area between estimate and exact.
    """
    save_figure(curves_figure(result), path)


_KNOT_STYLE = {
    "ls": "none",
    "marker": "o",
    "ms": 2.2,
    "mfc": KNOT,
    "mec": "none",
    "zorder": 4,
    "label": "_knots",
}


def _knots(points: Curves, *, roc: bool) -> tuple[np.ndarray, np.ndarray]:
    """The curve at the estimated quantiles, without the two fixed ends."""
    if roc:
        return points.fpr[1:-1], points.tpr[1:-1]
    return _pr(points, end=-1)


def _pr(c: Curves, end: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(recall, precision) where anything is predicted positive."""
    some = (c.tpr > 0) | (c.fpr > 0)
    if end is not None:
        some[end:] = False
    return c.recall[some], c.precision[some]


def _thin(x: np.ndarray, y: np.ndarray, n: int = MAX_LINE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Keep about `n` points evenly spaced along the curve's length (plus both ends): at figure
    resolution it is the same line, and an SVG of 200,000 exact points stays small."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) <= n:
        return x, y
    step = np.hypot(np.diff(x), np.diff(y))
    length = np.r_[0.0, np.cumsum(step)]
    if length[-1] <= 0:
        return x[[0, -1]], y[[0, -1]]
    cell = np.floor(length / length[-1] * n)
    keep = np.r_[True, cell[1:] != cell[:-1]]
    keep[-1] = True
    # keep the corners of a staircase too: the point before each kept one
    keep[:-1] |= keep[1:]
    return x[keep], y[keep]


def _style(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    lim = (-MARGIN, 1 + MARGIN)
    ax.set(xlim=lim, ylim=lim, xlabel=xlabel, ylabel=ylabel)
    ax.set_title(title, fontsize=10)
    ax.set_aspect("equal")
    ax.grid(True, color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(labelsize=8)


def _legend(ax: Axes, loc: LegendLocType, area_error: float | None) -> None:
    """Legend in a corner, with the area error (if known) as its last line."""
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    handles, labels = handles[::-1], labels[::-1]  # estimate, exact, then the guide line
    if area_error is not None:
        handles.append(Line2D([], [], ls="none"))
        labels.append(f"area error {area_error:.1e}")
    leg = ax.legend(handles, labels, loc=loc, fontsize=8, framealpha=0.9, handlelength=2.2)
    if area_error is not None:
        leg.get_texts()[-1].set_color("0.35")


# --------------------------------------------------------------------------------------------
# Reliability diagram


def reliability_figure(result: CalibrationResult) -> Figure:
    """Reliability diagram of `result` as a matplotlib Figure (see `plot_reliability`)."""
    fig = _figure_class()(figsize=(6, 7.2), layout="constrained")
    main, below = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [4, 1]})
    leaves = result.run.histogram.leaves
    m = result.n_bins
    n_leaves = leaves.shape[-1]
    mid = (np.arange(n_leaves) + 0.5) / n_leaves
    cmap = result.map
    lo, hi = result.run.score_range
    probability = result.ece_raw is not None

    main.plot([0, 1], [0, 1], color=GUIDE, lw=1, ls=":", label="perfectly calibrated", zorder=1)
    main.stairs(
        cmap.values,
        np.asarray(result.run.from_unit(cmap.edges)) if probability else cmap.edges,
        baseline=None,
        color="0.55",
        lw=1,
        alpha=0.7,
        label=f"calibration map ({'score' if probability else 'unit score'} → probability)",
        zorder=2,
    )
    # Each reliability curve: the score each leaf stands for, then its style (raw, calibrated).
    curves: list[tuple[np.ndarray, str, float, str, float, str, int]] = []
    if result.ece_raw is not None:
        raw = f"raw scores · ECE {_ece(result.ece_raw)}"
        curves.append((result.run.axis.leaf_midpoints(n_leaves), RAW, 1.5, "s", 4, raw, 3))
    calibrated = f"calibrated · ECE {_ece(result.ece_calibrated)}, in-sample"
    curves.append((cmap(mid), ESTIMATE, 1.8, "o", 4.5, calibrated, 4))
    for scores, color, lw, marker, ms, label, zorder in curves:
        x, y = reliability_points(leaves, scores, m)
        main.plot(x, y, color=color, lw=lw, marker=marker, ms=ms, label=label, zorder=zorder)
    lim = (-MARGIN, 1 + MARGIN)
    main.set(xlim=lim, ylim=lim, ylabel="Fraction of positives")
    main.set_box_aspect(1)
    main.grid(True, color="0.9", lw=0.6)
    main.set_axisbelow(True)
    main.tick_params(labelsize=8, labelbottom=False)
    main.legend(loc="lower right", fontsize=8, framealpha=0.9)
    main.set_title(
        f"Reliability over M = {m} equal-width bins (estimated from the release)",
        fontsize=9,
        color="0.3",
    )

    # Bucket mass: drawn as a density (examples per 0.01 of score) so that area is the bucket's
    # count; equi-depth buckets all hold about the same count, so their heights show where the
    # scores lie.
    edges, mass = _display_buckets(cmap.edges, cmap.mass)
    width = np.diff(edges)
    density = np.clip(mass, 0.0, None) / width / 100
    below.stairs(density, edges, fill=True, color=ESTIMATE, alpha=0.25, lw=0)
    below.stairs(density, edges, color=ESTIMATE, lw=0.8)
    k = len(cmap.values)
    if cmap.method == "binning":
        note = f"{k} equi-depth buckets, ≈{max(float(cmap.mass.sum()), 0.0) / k:,.0f} examples each"
    else:
        note = f"{len(width)} buckets (the edges of all of BBQ's binnings)"
    below.text(
        0.99,
        0.93,
        note,
        transform=below.transAxes,
        ha="right",
        va="top",
        fontsize=7.5,
        bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 1.5},
    )
    below.set_ylim(0, None)
    below.set_box_aspect(0.25)
    below.set_ylabel("examples\nper 0.01", fontsize=8)
    below.grid(True, color="0.9", lw=0.6)
    below.set_axisbelow(True)
    below.tick_params(labelsize=8)
    if probability:
        below.set_xlabel("Predicted probability")
    else:
        below.set_xlabel(
            f"Predicted probability · score rescaled from [{lo:g}, {hi:g}] (map, buckets)"
        )

    method = f"binning B = {k}" if result.method == "binning" else result.method.value
    fig.suptitle(describe_setting(result.run, method), fontsize=10)
    return fig


def plot_reliability(result: CalibrationResult, path: str | os.PathLike[str]) -> None:
    """Write the reliability diagram of one calibration to `path` (.png or .svg).

    Fraction of positives against mean score in M equal-width bins, estimated from the release's
    leaves (each leaf's mass at its midpoint, as `ece_from_histogram` counts it), for the raw
    scores (when they are probabilities) and the calibrated ones; the map itself lightly behind,
    and the map's buckets below.
    """
    save_figure(reliability_figure(result), path)


def reliability_points(
    leaves: np.ndarray, score: np.ndarray, n_bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """(mean score, fraction of positives) per equal-width bin with positive mass, each leaf's
    mass placed at `score` (its midpoint, or the calibrated midpoint). Noise can push a fraction
    outside [0, 1]; it is clipped for display."""
    mass = leaves[0] + leaves[1]
    b = np.minimum((np.asarray(score) * n_bins).astype(np.int64), n_bins - 1)
    bin_mass = np.bincount(b, mass, minlength=n_bins)
    pos = np.bincount(b, leaves[1], minlength=n_bins)
    score_sum = np.bincount(b, mass * score, minlength=n_bins)
    ok = bin_mass > 0
    return score_sum[ok] / bin_mass[ok], np.clip(pos[ok] / bin_mass[ok], 0.0, 1.0)


def _display_buckets(edges: np.ndarray, mass: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Buckets with some width: a bucket narrower than 1e-9 (equal equi-depth edges, or BBQ's
    merged edges that differ only by rounding) is added to the one before it (the first real one
    if it leads), so no density is a count divided by ~0."""
    real = np.diff(edges) > 1e-9
    if not real.any():
        return np.asarray(edges)[[0, -1]], np.array([float(np.sum(mass))])
    group = np.maximum(np.cumsum(real) - 1, 0)
    starts = edges[:-1][real]
    starts[0] = edges[0]
    return np.r_[starts, edges[-1]], np.bincount(group, mass, minlength=int(real.sum()))


def _ece(e: Estimate) -> str:
    text = f"{e.estimate:.4f}"
    if e.exact is not None:
        text += f" [exact {e.exact:.4f}]"
    return text


# --------------------------------------------------------------------------------------------
# Files


def save_figure(fig: Figure, path: str | os.PathLike[str]) -> None:
    """Write `fig` to `path`, in the format its extension names (.png or .svg)."""
    _save(fig, path, _format(path))


def _format(path: str | os.PathLike[str]) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        allowed = " or ".join(FORMATS)
        raise UsageError(f"cannot plot to '{path}': the file name must end in {allowed}.")
    return FORMATS[suffix]


def _figure_class() -> type[Figure]:
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise UsageError(MISSING) from e
    return Figure


def _save(fig: Figure, path: str | os.PathLike[str], fmt: str) -> None:
    """Save atomically; SVG keeps text as text (searchable, small) and carries no date, so the
    same result gives the same file."""
    import matplotlib

    options = {"dpi": PNG_DPI} if fmt == "png" else {"metadata": {"Date": None}}
    rc: dict[RcKeyType, str] = {"svg.fonttype": "none", "svg.hashsalt": "fedeval"}
    try:
        with matplotlib.rc_context(rc), atomic_output(path, "wb") as f:
            fig.savefig(f, format=fmt, facecolor="white", **options)
    finally:
        with contextlib.suppress(Exception):
            fig.clear()
