"""`fedeval calibrate`: a calibration map from one private release (binary scores)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from fedeval.cli.app import app
from fedeval.cli.common import (
    OutputFormat,
    check_buckets,
    errors_to_exit,
    plot_file,
    show,
)
from fedeval.cli.multiclass import (
    BetaOpt,
    ClientsOpt,
    ClipOpt,
    DeltaOpt,
    FailIfWorseOpt,
    HoldoutOpt,
    MulticlassOpt,
    ParticipationOpt,
    RoundsOpt,
    ServerLrOpt,
    UnweightedOpt,
    calibrate_multiclass_command,
    refuse_multiclass_options,
)
from fedeval.cli.options import (
    BudgetOpt,
    CiDrawsOpt,
    ClientColOpt,
    ExactOpt,
    FileArg,
    FromOpt,
    HeightOpt,
    LabelColOpt,
    LedgerOpt,
    MaxExamplesOpt,
    PerClientOpt,
    PosLabelOpt,
    RelationOpt,
    SaveReleaseOpt,
    ScoreColOpt,
    ScoreRangeOpt,
    SeedOpt,
    ShapeOpt,
    SignKeyOpt,
    ThreadsOpt,
    UnitOpt,
    VerifyKeyOpt,
)
from fedeval.cli.run import ReleaseOptions
from fedeval.core.config import PrivacyModel, Unit
from fedeval.documents.files import document_text

if TYPE_CHECKING:
    from fedeval.api.calibrate import CalibrationResult


@app.command()
def calibrate(
    file: FileArg = None,
    model: Annotated[
        PrivacyModel | None,
        typer.Option(
            "--model",
            "-m",
            help="Binary scores: federated, distdp or localdp (as for evaluate) \\[default: "
            "distdp]. Not used with --multiclass (its DP is user-level Gaussian on the sum).",
            case_sensitive=False,
            show_default=False,
        ),
    ] = None,
    epsilon: Annotated[
        float | None,
        typer.Option(
            "--epsilon",
            "-e",
            help="ε of the release \\[default: 1 for distdp, 5 for localdp]. With --multiclass: "
            "user-level (ε, δ)-DP over all rounds; no DP if absent.",
            show_default=False,
        ),
    ] = None,
    method: Annotated[
        str | None,
        typer.Option(
            help="Binary: binning (histogram binning on B equi-depth buckets) or bbq (Bayesian "
            "binning into quantiles) \\[default: binning]. Multiclass: fedbin, fedbbq (one-vs-all, "
            "with the heterogeneity weighting) or fedtemp (temperature scaling by FedAvg) "
            "\\[default: fedbbq].",
            show_default=False,
        ),
    ] = None,
    multiclass: MulticlassOpt = False,
    rounds: RoundsOpt = 12,
    participation: ParticipationOpt = None,
    clients: ClientsOpt = None,
    beta: BetaOpt = None,
    delta: DeltaOpt = None,
    clip: ClipOpt = None,
    unweighted: UnweightedOpt = False,
    holdout: HoldoutOpt = None,
    server_lr: ServerLrOpt = None,
    fail_if_worse: FailIfWorseOpt = False,
    buckets: Annotated[
        str,
        typer.Option(
            help="B for binning; 'auto' balances sampling and privacy noise (--multiclass: the 2^M "
            "fixed-width bins per class, default 128, or 32 under --epsilon)."
        ),
    ] = "auto",
    bins: Annotated[int, typer.Option("--bins", min=1, help="M equal-width bins of the ECE.")] = 15,
    height: HeightOpt = "auto",
    shape: ShapeOpt = "auto",
    seed: SeedOpt = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the calibration map (JSON, shareable) to this file; stdout stays empty "
            "(- for the map on stdout).",
            show_default=False,
        ),
    ] = None,
    output_format: Annotated[
        OutputFormat,
        typer.Option("--format", "-f", help="table, or json (the map document) on stdout."),
    ] = OutputFormat.table,
    plot: Annotated[
        str | None,
        typer.Option(
            help="Draw a reliability diagram: a .png or .svg file, or a directory ending in / "
            "(reliability.png in it).",
            show_default=False,
        ),
    ] = None,
    score_col: ScoreColOpt = "score",
    label_col: LabelColOpt = "label",
    client_col: ClientColOpt = None,
    score_range: ScoreRangeOpt = "0,1",
    pos_label: PosLabelOpt = None,
    per_client: PerClientOpt = False,
    exact: ExactOpt = True,
    ci_draws: CiDrawsOpt = 200,
    ledger: LedgerOpt = None,
    budget: BudgetOpt = None,
    from_: FromOpt = None,
    save_release: SaveReleaseOpt = None,
    sign_key: SignKeyOpt = None,
    verify_key: VerifyKeyOpt = None,
    unit: UnitOpt = Unit.EXAMPLE,
    max_examples: MaxExamplesOpt = None,
    relation: RelationOpt = None,
    threads: ThreadsOpt = None,
) -> None:
    """Fit a calibration map from one private release, and report ECE before and after.

    The map is monotone and in [0, 1]; apply it to new scores with [bold]fedeval apply[/bold].

    Example: [bold]fedeval calibrate scores.parquet -m distdp -o map.json && cat new.csv | fedeval
    apply map.json - > calibrated.csv[/bold]

    Multiclass: [bold]fedeval calibrate probs.parquet --multiclass --method fedtemp --rounds
    30 --participation 0.1 -e 1 -o map.json[/bold]

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    if multiclass:
        with errors_to_exit():
            calibrate_multiclass_command(locals())
        return
    model = PrivacyModel.DISTDP if model is None else model
    method = method or "binning"
    from fedeval.api.calibrate import calibrate_file, calibrate_run
    from fedeval.views.dicts import map_dict, shareable
    from fedeval.views.terminal import render_calibration_table

    with errors_to_exit():
        release = ReleaseOptions.of(locals())
        refuse_multiclass_options(locals())
        check_buckets(buckets)
        plot_path = plot_file(plot, "reliability.png")
        release.check()
        cal = release.estimate(
            lambda run: calibrate_run(run, method=method, buckets=buckets, n_bins=bins),
            lambda file, **options: calibrate_file(
                file, method=method, buckets=buckets, n_bins=bins, **options
            ),
        )
        name = release.source
        doc = map_dict(cal, source=name, score_col=score_col)
        # The map file is made to be shared: under DP it holds no exact value.
        map_text = document_text(shareable(doc), sign_key=release.signer)
        to_stdout = release.commit(
            cal.run,
            doc=doc,
            text=map_text,
            output=output,
            plot=None if plot_path is None else (plot_path, lambda p: draw_reliability(cal, p)),
        )
        as_json = document_text(doc) if output_format is OutputFormat.json else None
        show(
            map_text,
            to_stdout,
            output,
            as_json,
            lambda: render_calibration_table(cal, Console(), source=name),
        )


def draw_reliability(cal: CalibrationResult, path: Path) -> None:
    """The reliability diagram drawn to `path` (matplotlib is imported only for a plot)."""
    from fedeval.views.plots import plot_reliability

    plot_reliability(cal, path)
