"""The multiclass result as a rich table: metrics before and after, per-round privacy, the
federation's schedule; it and the map document (`multiclass_map_dict`) are the result's
renderers in `fedeval.views.render` (registered below)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from fedeval.multiclass.denoise import NoisyBinning
from fedeval.multiclass.result import (
    MulticlassResult,
    Partition,
    multiclass_map_dict,
)
from fedeval.multiclass.temperature import (
    Safeguard,
    TemperatureCalibrator,
)
from fedeval.views.render import Format, register
from fedeval.views.terminal import columns_table


def render_multiclass_table(
    result: MulticlassResult, console: Console, *, source: str | None = None
) -> None:
    """Human-readable summary: setting, privacy claim, metrics before/after, the calibrator."""
    r = result
    name = escape(source or "data")
    if r.partition is Partition.DIRICHLET:
        skew = f"Dirichlet β = {r.beta:g}"
    else:
        skew = "IID" if r.partition is Partition.IID else "client column"
    console.print(
        f"[bold]{name}[/bold]: {r.rows:,} rows, {r.n_classes} classes, {r.clients:,} clients "
        f"({skew}) · [bold]{r.name}[/bold] on {r.input_kind.value} · T = {r.rounds} rounds, "
        f"p = {r.participation:g}",
        soft_wrap=True,
    )
    claim = r.mechanism.guarantee()
    style = "bold red" if r.seeded and r.privacy is not None else "dim"
    console.print(f"[{style}]{escape(claim)}[/{style}]", soft_wrap=True)
    t = columns_table(["metric", "before", "after", "change"], left=1)
    rows = (
        (f"classwise ECE % ({r.ece_bins} bins)", r.before.cw_ece, r.after.cw_ece, 100),
        (
            f"top-label ECE % ({r.ece_bins} bins)",
            r.before.top_label_ece,
            r.after.top_label_ece,
            100,
        ),
        ("accuracy %", r.before.accuracy, r.after.accuracy, 100),
    )
    for label, b, a, scale in rows:
        t.add_row(label, f"{scale * b:.3f}", f"{scale * a:.3f}", f"{scale * (a - b):+.3f}")
    console.print(t)
    if isinstance(r.calibrator, TemperatureCalibrator):
        console.print(f"temperature T = {r.calibrator.temperature:.4f}")
        g = r.safeguard
        if isinstance(g, Safeguard):
            how = "DP estimate" if r.privacy is not None else "exact"
            line = (
                f"held-out check ({how}): NLL gain {g.gain:+.4f} {g.unit}"
                + (f" ± {g.sd:.4f} (noise SD)" if g.sd else "")
                + f" for the fitted T = {g.fitted:.4f}"
            )
            if g.kept:
                console.print(f"{line} → kept", soft_wrap=True)
            else:
                console.print(
                    f"[bold red]{line} → no gain shown: the map holds T = 1 (the model's own "
                    "probabilities)[/bold red]",
                    soft_wrap=True,
                )
    else:
        cal = r.calibrator
        check = r.safeguard if isinstance(r.safeguard, NoisyBinning) else None
        if check is not None:
            line = (
                "check from the noisy release (no privacy cost): estimated gain over the "
                f"identity {check.gain:+.2e} ± {check.gain_sd:.2e} (mass-weighted squared gap)"
            )
            if check.kept:
                console.print(f"{line} → kept", soft_wrap=True)
            else:
                console.print(
                    f"[bold red]{line} → no gain shown: the map is the identity (the model's "
                    "own probabilities); the noise per bin is too large for binning (FedTemp "
                    "needs far less signal)[/bold red]",
                    soft_wrap=True,
                )
        if cal.bin_weights is not None:
            w = cal.weights()
            pooled = "one map for every class (pooled histograms); " if r.pooled else ""
            console.print(
                f"{r.bins} bins; {pooled}weight of the binning against the identity, after the "
                f"DP shrinkage: mean {w.mean():.2f}, max {w.max():.2f} (bin 0 kept as is)",
                soft_wrap=True,
            )
        else:
            alpha = ", ".join(f"{a:.2f}" for a in cal.alpha)
            console.print(f"{r.bins} bins per class; weights α_j = [{alpha}]", soft_wrap=True)
    if not r.method.order_preserving:
        console.print(
            "[yellow]binning is not order-preserving: it can change top-1 predictions (and "
            "accuracy), more so with many classes and few examples per bin[/yellow]",
            soft_wrap=True,
        )
    where = "in-sample" if r.in_sample else f"on {r.eval_rows:,} held-out rows"
    warn = ""
    if r.accuracy_change < 0:
        warn = f" · [bold red]accuracy falls by {-100 * r.accuracy_change:.2f} points[/bold red]"
    foot = f"exact metrics {where}{warn}"
    if r.privacy is not None:
        foot += " (not in the map file: under DP it holds no exact value)"
    if r.seed is not None:
        foot += f" · seed {r.seed}"
    console.print(f"[dim]{foot}[/dim]", soft_wrap=True)


register(
    "MulticlassResult",
    Format.JSON,
    lambda r, c: multiclass_map_dict(r, source=c.source),
)
register(
    "MulticlassResult",
    Format.TABLE,
    lambda r, c: render_multiclass_table(r, c.console, source=c.source),
)
"""The multiclass result's renderers, in the one table of `fedeval.views.render`."""
