"""The comparison's figure: both models' ROC and PR curves, each with its 95% noise band.

The curves are `fedeval.curves`' estimates of each release (`Evaluation.curves.dense`). The band
is pointwise, at every leaf edge t: the 2.5% and 97.5% points of TPR(t) (ROC) and precision(t)
(PR) over the release's fresh noise draws (the draws behind its intervals), drawn against the
estimate's FPR(t) and recall(t). It shows the noise only, not the discretisation; without noise
there is no band. Post-processing of the two releases: it shows nothing they do not hold.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from fedeval.views.plots import (
    ESTIMATE,
    GUIDE,
    RAW,
    _figure_class,
    _format,
    _pr,
    _save,
    _style,
    describe_setting,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from fedeval.api.compare import Comparison
    from fedeval.api.evaluate import Evaluation


def noise_bands(ev: Evaluation) -> dict[str, np.ndarray] | None:
    """Pointwise 95% noise bands at every leaf edge, from the top score down: fpr and recall of
    the estimate, and (lo, hi) of tpr and precision over the noise draws; None without draws."""
    draws = ev.run.noise_draws
    if draws is None:
        return None
    leaves = ev.run.histogram.leaves

    def rates(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tp = np.cumsum(x[..., 1, ::-1], axis=-1)
        fp = np.cumsum(x[..., 0, ::-1], axis=-1)
        p, n = tp[..., -1:], fp[..., -1:]
        with np.errstate(divide="ignore", invalid="ignore"):
            tpr, fpr = tp / p, fp / n
            precision = tp / (tp + fp)
        return np.clip(tpr, 0, 1), np.clip(fpr, 0, 1), np.clip(precision, 0, 1)

    tpr, fpr, _ = rates(leaves)
    d_tpr, _, d_prec = rates(leaves + draws)
    with np.errstate(invalid="ignore"):
        return {
            "fpr": fpr,
            "recall": tpr,
            "tpr": np.nanpercentile(d_tpr, [2.5, 97.5], axis=0),
            "precision": np.nanpercentile(d_prec, [2.5, 97.5], axis=0),
        }


def comparison_figure(c: Comparison) -> Figure:
    """ROC (left) and PR (right) of both models, with bands."""
    fig = _figure_class()(figsize=(10, 4.8), layout="constrained")
    roc, pr = fig.subplots(1, 2)
    roc.plot([0, 1], [0, 1], color=GUIDE, lw=1, ls=":", label="chance", zorder=1)
    for side, ev, colour in (("baseline", c.baseline, RAW), ("candidate", c.candidate, ESTIMATE)):
        _draw(roc, pr, side, ev, colour)
    _style(roc, "ROC curve", "False positive rate", "True positive rate (recall)")
    _style(pr, "Precision–recall curve", "Recall", "Precision")
    roc.legend(loc="lower right", fontsize=8)
    pr.legend(loc="best", fontsize=8)
    d = c["auc"].difference
    head = f"candidate − baseline: AUC {d.estimate:+.4f}"
    if d.ci95 is not None:
        head += f" [{d.ci95[0]:+.4f}, {d.ci95[1]:+.4f}] (95%)"
    b, k = c.baseline.run.config, c.candidate.run.config
    setting = describe_setting(c.baseline.run)
    if b.epsilon is not None and k.epsilon is not None:
        setting = setting.replace(
            f"ε = {b.epsilon:g}", f"ε = {b.epsilon:g} + {k.epsilon:g} for the pair"
        )
    fig.suptitle(head + "\n" + setting, fontsize=10)
    return fig


def _draw(roc: Axes, pr: Axes, side: str, ev: Evaluation, colour: str) -> None:
    est = ev.curves.dense
    roc.plot(est.fpr, est.tpr, color=colour, lw=2, label=f"{side} (AUC {ev.auc.estimate:.4f})")
    pr.plot(*_pr(est), color=colour, lw=2, label=f"{side} (AP {est.average_precision:.4f})")
    bands = noise_bands(ev)
    if bands is None:
        return
    roc.fill_between(bands["fpr"], *bands["tpr"], color=colour, alpha=0.2, lw=0)
    pr.fill_between(bands["recall"], *bands["precision"], color=colour, alpha=0.2, lw=0)


def plot_comparison(c: Comparison, path: str | os.PathLike[str]) -> None:
    """Write the figure to `path` (.png or .svg), atomically."""
    fmt = _format(path)
    _save(comparison_figure(c), path, fmt)
