"""`fedeval calibrate`: a calibration map from one private release (binary scores)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from fedeval.cli.app import app
from fedeval.cli.common import (
    OutputFormat,
    check_buckets,
    emit,
    errors_to_exit,
    plot_file,
    progress_bar,
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
    calibrate_multiclass,
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
from fedeval.cli.run import (
    charge_if_new,
    check_ledger_options,
    keys_apply,
    loaded_run,
    source_or_aggregate,
    stage_release,
    table_options,
)
from fedeval.cli.support import option_given
from fedeval.config import PrivacyModel, Unit
from fedeval.documents import document_text
from fedeval.errors import UsageError
from fedeval.outputs import Outputs


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
        binary_only = {
            "--model": model is not None,
            "--height": height != "auto",
            "--shape": shape != "auto",
            "--from": from_ is not None,
            "--save-release": save_release is not None,
            "--per-client": per_client,
            "--unit": unit is not Unit.EXAMPLE,
            "--relation": relation is not None,
            "--sign-key": sign_key is not None,
            "--verify-key": verify_key is not None,
            "--plot": plot is not None,
        }
        with errors_to_exit():
            given = [k for k, v in binary_only.items() if v]
            if given:
                raise UsageError(f"{', '.join(given)} cannot be used with --multiclass.")
            if file is None:
                raise UsageError("--multiclass needs FILE.")
            calibrate_multiclass(
                file,
                method=method or "fedbbq",
                rounds=rounds,
                participation=participation,
                clients=clients,
                beta=beta,
                client_col=client_col,
                epsilon=epsilon,
                delta=delta,
                clip=clip,
                buckets=buckets,
                ece_bins=bins,
                weighted=not unweighted,
                holdout=holdout,
                server_lr=server_lr,
                fail_if_worse=fail_if_worse,
                label_col=label_col,
                seed=seed,
                output=output,
                output_format=output_format,
                ledger=ledger,
                budget=budget,
            )
        return
    multiclass_only = {
        "--rounds": option_given("rounds"),
        "--participation": option_given("participation"),
        "--clients": clients is not None,
        "--beta": beta is not None,
        "--delta": delta is not None,
        "--clip": clip is not None,
        "--unweighted": unweighted,
        "--holdout": holdout is not None,
        "--server-lr": server_lr is not None,
        "--fail-if-worse": fail_if_worse,
    }
    model = PrivacyModel.DISTDP if model is None else model
    method = method or "binning"
    from fedeval.calibration import calibrate_file
    from fedeval.io import source_name
    from fedeval.report import map_dict, render_calibration_table, shareable

    with errors_to_exit(), progress_bar("encoding client reports", per_client) as progress:
        given = [k for k, v in multiclass_only.items() if v]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise UsageError(f"{', '.join(given)} {verb} to --multiclass only.")
        check_buckets(buckets)
        plot_path = plot_file(plot, "reliability.png")
        check_ledger_options(ledger, budget)
        keys_apply(save_release, sign_key, from_, verify_key)
        source_or_aggregate(
            file,
            from_,
            epsilon=epsilon,
            height=height,
            shape=shape,
            per_client=per_client,
            unit=unit,
            max_examples=max_examples,
            relation=relation,
        )
        if from_ is not None:
            from fedeval.calibration import calibrate_run

            run = loaded_run(from_, seed, ci_draws, verify_key)
            cal = calibrate_run(run, method=method, buckets=buckets, n_bins=bins)
            name = str(from_)
        else:
            opts = table_options(
                score_col,
                label_col,
                client_col,
                score_range,
                pos_label,
                exact,
                per_client,
                progress,
                unit=unit,
                max_examples=max_examples,
                relation=relation,
                threads=threads,
            )
            cal = calibrate_file(
                file,
                method=method,
                buckets=buckets,
                n_bins=bins,
                model=model,
                epsilon=epsilon,
                height=height,
                shape=shape,
                seed=seed,
                ci_draws=ci_draws,
                **opts,
            )
            name = source_name(file)
        doc = map_dict(cal, source=name, score_col=score_col)
        covered = f"calibrate: {cal.method.value} map, ECE"
        # The map file is made to be shared: under DP it holds no exact value.
        map_text = document_text(shareable(doc))
        with Outputs() as out:
            to_stdout = emit(map_text, output, out)
            stage_release(out, save_release, cal.run, sign_key)
            if plot_path is not None:
                from fedeval.plot import plot_reliability

                plot_reliability(cal, out.staged_path(plot_path))
            charge_if_new(ledger, budget, doc, "calibrate", covered, name, cal.run)
            out.commit()
        if to_stdout:
            sys.stdout.write(map_text)
        elif output is not None:
            pass  # -o FILE: stdout stays empty
        elif output_format is OutputFormat.json:
            sys.stdout.write(document_text(doc))
        else:
            render_calibration_table(cal, Console(), source=name)
