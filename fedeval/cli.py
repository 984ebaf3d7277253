"""The `fedeval` command: a thin Typer layer over the library.

Each command parses its options, makes one library call and renders the result. Data goes to
stdout, messages to stderr. Exit codes: 0 ok, 1 a quality gate failed, 2 bad input or usage.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
import warnings
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from fedeval import __version__
from fedeval.cli_support import FedevalGroup, error_console, option_given, set_debug
from fedeval.config import PrivacyModel, Relation, Unit
from fedeval.documents import document_text
from fedeval.errors import UsageError
from fedeval.outputs import Outputs, is_stdout, plot_target

EXIT_CODES = (
    """Exit codes: 0 ok · 1 a quality gate failed · 2 bad input or usage · 70 internal error."""
)

app = typer.Typer(
    name="fedeval",
    help=(
        "Evaluate and calibrate classifiers on labelled data that stays with its owners: ROC "
        "AUC, precision/recall/accuracy at any threshold, ROC and PR curves, and calibration "
        "maps, each with a 95% interval, from one private release under secure aggregation "
        "(federated), distributed DP (distdp) or local DP (localdp). Plan the population a "
        "deployment needs, gate CI on quality, and keep a privacy budget.\n\n"
        "Start with: [bold]fedeval evaluate scores.parquet --model distdp[/bold]\n\n" + EXIT_CODES
    ),
    no_args_is_help=True,
    cls=FedevalGroup,
    add_completion=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
# soft_wrap: one message stays one line in logs; markup is never read from message text.
err = Console(stderr=True, soft_wrap=True)


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


@contextlib.contextmanager
def _errors_to_exit() -> Iterator[None]:
    """Library warnings become one `warning:` line each on stderr; errors pass on to the command
    group (`fedeval.cli_support.FedevalGroup`), the one place they become messages and exit
    codes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            shown = set()
            for w in caught:
                if issubclass(w.category, RuntimeWarning):  # numpy's arithmetic, not for people
                    continue
                text = " ".join(str(w.message).split())
                if text not in shown:
                    shown.add(text)
                    error_console().print(Text.assemble(("fedeval: warning:", "yellow"), " ", text))


@contextlib.contextmanager
def _progress_bar(label: str, enabled: bool) -> Iterator:
    """A progress callback drawing a bar on stderr (only on a terminal), or None."""
    if not enabled:
        yield None
        return
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _plural(n: int, noun: str) -> str:
    """'1 part', '2 parts', '1,000 parts'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _floats(text: str, option: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(
            f"{option} takes numbers separated by commas, e.g. 0.3,0.5. Found {text!r}."
        ) from None


MAX_QUANTILES = 1 << 16
MAX_BUCKETS = 1 << 20
"""Beyond these, memory grows past a laptop's and no estimate gets better."""


def _check_buckets(text: str) -> None:
    """--buckets: 'auto' or a positive integer up to MAX_BUCKETS (the library checks the rest)."""
    try:
        b = int(text)
    except ValueError:
        return
    if b > MAX_BUCKETS:
        raise UsageError(f"--buckets must be at most {MAX_BUCKETS:,}. Found {b:,}.")


def _score_range(text: str) -> tuple[float, float]:
    vals = _floats(text, "--score-range")
    if (
        len(vals) != 2
        or not vals[0] < vals[1]
        or not all(map(math.isfinite, vals))
        or not math.isfinite(vals[1] - vals[0])
    ):
        raise UsageError(
            f"--score-range takes finite lo,hi with lo < hi, e.g. -5,5. Found {text!r}."
        )
    return vals[0], vals[1]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fedeval {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Print the version."
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-Q",
            help="No progress or summary lines on stderr (errors and warnings still show).",
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help="Show the Python traceback of an internal error (exit 70)."),
    ] = False,
) -> None:
    set_debug(ctx, debug)
    err.quiet = quiet


FileArg = Annotated[
    str | None,
    typer.Argument(
        help="Scored, labelled table: Parquet or CSV, or - for CSV on stdin (or use --from).",
        metavar="FILE",
        show_default=False,
    ),
]
FromOpt = Annotated[
    Path | None,
    typer.Option(
        "--from",
        help="Estimate from a saved aggregate instead of simulating on FILE: no raw data, so "
        "estimates and 95% intervals only. Its privacy settings are the aggregate's.",
        show_default=False,
    ),
]
SaveReleaseOpt = Annotated[
    Path | None,
    typer.Option(
        help="Also save the release this run produced (a versioned aggregate, reusable with "
        "--from).",
        show_default=False,
    ),
]
ModelOpt = Annotated[
    PrivacyModel,
    typer.Option(
        "--model",
        "-m",
        help="federated: secure aggregation, exact sums, no DP. distdp: clients add Pólya "
        "shares that sum to discrete Laplace (central ε-DP). localdp: each example sends an "
        "OUE report (ε-local DP).",
        case_sensitive=False,
    ),
]
EpsilonOpt = Annotated[
    float | None,
    typer.Option(
        "--epsilon",
        "-e",
        help="Privacy budget ε of the whole release \\[default: 1 for distdp, 5 for localdp; "
        "not used by federated].",
        show_default=False,
    ),
]
HeightOpt = Annotated[
    str,
    typer.Option(
        help="Leaf height h: the release has 2^h cells over the score range. 'auto' balances "
        "noise against resolution for this n and ε.",
    ),
]
ShapeOpt = Annotated[
    str,
    typer.Option(
        help="'flat' releases the leaves only (sensitivity 1); 'hierarchy' releases levels "
        "1..h (the papers' dyadic tree, sensitivity h, consistent range queries); 'auto' picks "
        "hierarchy under DP.",
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        help="Seed for a reproducible simulation: its noise is NOT private (documents say so "
        "and the ledger refuses them). Without it, noise comes from the OS CSPRNG and no seed "
        "is published.",
        show_default=False,
    ),
]
ScoreColOpt = Annotated[str, typer.Option(help="Column holding the scores.")]
LabelColOpt = Annotated[str, typer.Option(help="Column holding the labels.")]
ClientColOpt = Annotated[
    str | None,
    typer.Option(
        help="Column holding client ids \\[default: 'client' if present, else one example "
        "per client].",
        show_default=False,
    ),
]
ScoreRangeOpt = Annotated[
    str, typer.Option(help="lo,hi: the range scores lie in; mapped onto [0, 1].")
]
PosLabelOpt = Annotated[
    str | None,
    typer.Option(help="Label value of the positive class \\[default: labels are 0/1 or bool]."),
]
PerClientOpt = Annotated[
    bool,
    typer.Option(
        "--per-client",
        help="Materialise every client's report (the deployed encoder) instead of drawing "
        "the aggregate directly; same distribution, much slower.",
    ),
]
ExactOpt = Annotated[
    bool,
    typer.Option(
        "--exact/--no-exact",
        help="Also compute the exact values from the input (a simulation knows the truth).",
    ),
]
QuantilesOpt = Annotated[
    int,
    typer.Option(
        "--quantiles",
        "-q",
        min=2,
        max=MAX_QUANTILES,
        help="Q quantiles per class for the ROC and PR curves.",
    ),
]


CiDrawsOpt = Annotated[
    int,
    typer.Option(
        "--ci-draws",
        min=0,
        help="Fresh noise draws behind the 95% intervals; 0 switches intervals off (faster).",
    ),
]
FailUnderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-under",
        help="Floor METRIC=VALUE (repeatable, or comma-separated): exit 1 if the metric may be "
        "below it. Metrics: auc, ap, roc_auc_curve, ece, precision@t, recall@t, accuracy@t.",
        show_default=False,
    ),
]
FailOverOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-over",
        help="Ceiling METRIC=VALUE (repeatable): exit 1 if the metric may be above it, e.g. "
        "ece=0.03.",
        show_default=False,
    ),
]
GateOnOpt = Annotated[
    str,
    typer.Option(
        help="Judge gates on the 95% 'bound' (a floor needs the lower bound to clear it) or on "
        "the 'estimate'.",
    ),
]
LedgerOpt = Annotated[
    Path | None,
    typer.Option(
        help="Privacy ledger (JSON Lines) to charge this release to; needs --budget.",
        show_default=False,
    ),
]
BudgetOpt = Annotated[
    float | None,
    typer.Option(
        help="Total ε the ledger may spend; a release that would exceed it is refused.",
        show_default=False,
    ),
]
UnitOpt = Annotated[
    Unit,
    typer.Option(
        help="Whom ε protects: 'example' (the papers' setting: a client holding k examples is "
        "protected at k·ε), or 'client' (each client's examples capped at --max-examples, "
        "chosen at random, and the noise scaled to a whole client).",
        case_sensitive=False,
    ),
]
RelationOpt = Annotated[
    Relation | None,
    typer.Option(
        "--relation",
        case_sensitive=False,
        help="Neighbouring relation ε is stated over. 'add-remove': neighbours differ by one "
        "unit's presence; the size stays secret, so no exact count is released. 'replace': "
        "one unit's data is replaced; the number of units is public and the distdp noise "
        "doubles (Δ = 2·levels·L). \\[default: add-remove for distdp; replace for localdp, "
        "whose reports reveal presence]",
        show_default=False,
    ),
]
MinCohortOpt = Annotated[
    int,
    typer.Option(
        "--min-cohort",
        min=2,
        help="Smallest cohort accepted: the server learns each cohort's sum, which for a "
        "handful of clients says much about each.",
    ),
]
SignKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--sign-key",
        help="Ed25519 private key (from fedeval keygen) to sign the saved release with.",
        show_default=False,
    ),
]
VerifyKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--verify-key",
        help="Ed25519 public key (from fedeval keygen): refuse input not signed by it.",
        show_default=False,
    ),
]
MaxExamplesOpt = Annotated[
    int | None,
    typer.Option(
        "--max-examples",
        min=1,
        help="L, the cap on each client's examples under --unit client.",
        show_default=False,
    ),
]

ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        help="Threads that read and histogram the input \\[default: every core]; the result is "
        "the same for any number.",
        show_default=False,
    ),
]


def _gates(fail_under, fail_over, gate_on: str):
    from fedeval.gates import GateOn, Kind, parse_gates

    try:
        on = GateOn(gate_on)
    except ValueError:
        raise UsageError(f"--gate-on takes bound or estimate. Found {gate_on!r}.") from None
    return parse_gates(fail_under, Kind.FLOOR) + parse_gates(fail_over, Kind.CEILING), on


def _source_or_aggregate(
    file: str | None,
    from_: Path | None,
    *,
    epsilon: float | None,
    height: str,
    shape: str,
    per_client: bool,
    unit: Unit = Unit.EXAMPLE,
    max_examples: int | None = None,
    relation: str | None = None,
) -> None:
    """Exactly one of FILE and --from; settings only a simulation takes make no sense with
    --from (the aggregate fixes the release)."""
    simulation_only = {
        "--relation": relation is not None,
        "--epsilon": epsilon is not None,
        "--height": height != "auto",
        "--shape": shape != "auto",
        "--per-client": per_client,
        "--unit": unit is not Unit.EXAMPLE,
        "--max-examples": max_examples is not None,
    }
    if height != "auto":
        from fedeval.config import MAX_HEIGHT

        try:
            h = int(height)
        except ValueError:
            h = None  # the library names what it expects
        if h is not None and not 1 <= h <= MAX_HEIGHT:
            raise UsageError(f"--height must be 'auto' or 1..{MAX_HEIGHT}. Found {h}.")
    if (file is None) == (from_ is None):
        raise UsageError(
            "give FILE (simulate the protocol on a table) or --from AGGREGATE (estimate from a "
            "saved release), exactly one of them."
        )
    if from_ is not None:
        given = [name for name, value in simulation_only.items() if value]
        if given:
            raise UsageError(
                f"{', '.join(given)} cannot be used with --from: the aggregate fixes the release."
            )


def _loaded_run(from_: Path, seed: int | None, ci_draws: int, verify_key: Path | None = None):
    from fedeval.releasefile import load_release
    from fedeval.simulate import Simulated

    release, score_range = load_release(from_, verify_key=_public_key(verify_key))
    return Simulated.from_release(release, score_range, seed=seed, ci_draws=ci_draws)


def _private_key(path: Path | None):
    """The Ed25519 signing key at `path` (None: no signature)."""
    if path is None:
        return None
    from fedeval.integrity import load_private_key

    return load_private_key(path)


def _public_key(path: Path | None):
    """The Ed25519 verify key at `path` (None: the digest alone is checked)."""
    if path is None:
        return None
    from fedeval.integrity import load_public_key

    return load_public_key(path)


def _keys_apply(
    save_release: Path | None,
    sign_key: Path | None,
    from_: Path | None,
    verify_key: Path | None,
) -> None:
    """--sign-key signs what --save-release writes; --verify-key checks what --from reads."""
    if sign_key is not None and save_release is None:
        raise UsageError("--sign-key signs the release --save-release writes; add --save-release.")
    if verify_key is not None and from_ is None:
        raise UsageError("--verify-key checks the release --from reads; add --from.")


def _save(out: Outputs, path: Path | None, run, sign_key: Path | None = None) -> None:
    """Stage the release --save-release asks for (written when the run commits)."""
    if is_stdout(path):
        raise UsageError("--save-release takes a file name (stdout carries the report).")
    if path is not None:
        from fedeval.releasefile import save_release

        save_release(out.staged_path(path), run.release, run.axis, sign_key=_private_key(sign_key))


def _plot_path(plot: str | None, default_name: str) -> Path | None:
    """Where --plot draws (a file, or `default_name` in a directory given with a final '/'),
    its extension checked before any work."""
    if plot is None:
        return None
    path = plot_target(plot, default_name)
    _check_plot_suffix(path)
    return path


def _emit(text: str | None, output: Path | None, out: Outputs) -> bool:
    """The -o convention of every command: -o PATH stages `text` for PATH (stdout stays empty);
    -o - means stdout. Returns whether `text` goes to stdout once the run commits."""
    if output is None or is_stdout(output):
        return is_stdout(output)
    if text is not None:
        out.stage_text(output, text)
    return False


def _charge_if_new(ledger, budget, doc, command, covered, source, run) -> None:
    """A simulated run is a new release and is charged; estimates from a saved aggregate are
    post-processing of a release already charged, and cost no privacy budget. (`source` is not
    recorded in the ledger.)"""
    if run.simulation:
        _charge(ledger, budget, doc, command, covered, source)
    elif ledger is not None:
        err.print(f"ledger {ledger}: nothing charged (post-processing of a saved release)")


def _with_gate_thresholds(text: str | None, gates, score_range) -> list[float] | None:
    """The thresholds to evaluate: those asked for (or the default ones) plus every threshold a
    gate names, so `--fail-under recall@0.5=0.7` works without --thresholds."""
    from fedeval.evaluate import DEFAULT_THRESHOLDS
    from fedeval.gates import gate_thresholds

    extra = gate_thresholds(gates)
    if text is None and not extra:
        return None
    lo, hi = score_range
    base = (
        _floats(text, "--thresholds")
        if text is not None
        else [lo + (hi - lo) * t for t in DEFAULT_THRESHOLDS]
    )
    return sorted(set(base) | set(extra))


def _check_ledger_options(ledger: Path | None, budget: float | None) -> None:
    """Before any work: --budget needs --ledger; a new ledger needs --budget (it is stored then);
    an existing ledger must be readable (v2) and agree with a --budget given again."""
    if ledger is None:
        if budget is not None:
            raise UsageError("--budget is the total ε of a privacy ledger: add --ledger FILE.")
        return
    from fedeval.ledger import check_budget, check_writable

    check_writable(ledger)
    if check_budget(ledger, budget) is None and budget is None:
        raise UsageError(
            f"ledger '{ledger}' does not exist yet: create it by giving its budget once, "
            f"--ledger {ledger} --budget ε (the ledger stores it)."
        )


def _charge(
    ledger: Path | None, budget: float | None, doc: dict, command: str, covered: str, source: str
) -> None:
    """Charge the release to the ledger before anything is shown (refused: nothing is).

    `source` is not recorded: a ledger holds no file paths (and no seed)."""
    if ledger is None:
        return
    from fedeval.ledger import charge, make_entry, read_ledger

    entry = make_entry(doc, command=command, covered=covered)
    total = charge(ledger, entry, budget)
    header, _ = read_ledger(ledger)
    limit = header["budget"] if header else {"epsilon": budget, "delta": 0.0}
    at = f" (budget at δ = {limit['delta']:g})" if limit["delta"] else ""
    err.print(
        f"ledger {ledger}: dataset '{entry['dataset']}' ε spent {total:g} of "
        f"{limit['epsilon']:g}{at}",
        highlight=False,
    )


def _apply_gates(gates, on, doc: dict) -> None:
    """Print each verdict on stderr; exit 1 if any gate failed."""
    if not gates:
        return
    from fedeval.errors import GateFailed
    from fedeval.gates import judge, report_metrics

    verdicts = judge(gates, report_metrics(doc), on)
    for v in verdicts:
        style = "green" if v.passed else "bold red"
        err.print(Text(f"gate {v.describe(on)}", style=style))
    failed = [v for v in verdicts if not v.passed]
    if failed:
        names = ", ".join(v.gate.metric for v in failed)
        raise GateFailed(f"{len(failed)} of {len(verdicts)} quality gates failed: {names}.")


def _table_options(
    score_col: str,
    label_col: str,
    client_col: str | None,
    score_range: str,
    pos_label: str | None,
    exact: bool,
    per_client: bool,
    progress,
    *,
    unit: Unit = Unit.EXAMPLE,
    max_examples: int | None = None,
    relation: str | None = None,
    threads: int | None = None,
) -> dict:
    """The reading and simulation options every one-shot command passes to the library."""
    from fedeval.io import Columns

    return {
        "unit": unit,
        "max_examples": max_examples,
        "relation": relation,
        "columns": Columns(score_col, label_col, client_col),
        "pos_label": pos_label,
        "score_range": _score_range(score_range),
        "exact": exact,
        "path": "per-client" if per_client else "fast",
        "progress": progress,
        "threads": threads,
        "read_progress": _ReadBar() if err.is_terminal and not err.quiet else None,
    }


class _ReadBar:
    """`read_progress` for the library: a bar of rows read on stderr, shown only once a read
    has taken READ_BAR_AFTER seconds (a short read draws nothing), gone when the read ends."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.bar: Progress | None = None
        self.task = None

    def __call__(self, rows: int | None) -> None:
        if rows is None:  # the read is over
            if self.bar is not None:
                self.bar.stop()
                self.bar = None
            return
        if self.bar is None:
            if time.monotonic() - self.start < READ_BAR_AFTER:
                return
            self.bar = Progress(
                TextColumn("reading"),
                BarColumn(),
                TextColumn("{task.completed:,} rows"),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("reading", total=None)
        self.bar.update(self.task, completed=rows)


READ_BAR_AFTER = 2.0
"""Seconds a read runs before its progress bar appears."""


def _write_output(text: str, output: Path | None) -> None:
    """Data to a file (atomically) if asked, else to stdout."""
    from fedeval.io import atomic_output

    if output is None or str(output) == "-":
        sys.stdout.write(text)
        return
    with atomic_output(output) as f:
        f.write(text)


@app.command()
def evaluate(
    file: FileArg = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    height: HeightOpt = "auto",
    shape: ShapeOpt = "auto",
    buckets: Annotated[
        str,
        typer.Option(
            help="AUC buckets: 'auto' uses the leaves; B uses B equi-depth buckets at the "
            "estimated quantiles (the papers' estimator).",
        ),
    ] = "auto",
    thresholds: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated thresholds for precision/recall/accuracy (positive means score "
            "≥ t). Declared here, they become cell edges of the release: exact sums of cells, no "
            "interpolation (asked later from a saved release, a threshold inside a cell gets the "
            "worst case of where its examples sit) \\[default: 1/11 … 10/11 of the score range].",
            show_default=False,
        ),
    ] = None,
    quantiles: QuantilesOpt = 100,
    seed: SeedOpt = None,
    output_format: Annotated[
        OutputFormat,
        typer.Option("--format", "-f", help="table for people, json for programs (one document)."),
    ] = OutputFormat.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the JSON report to this file instead of stdout (- for stdout).",
            show_default=False,
        ),
    ] = None,
    plot: Annotated[
        str | None,
        typer.Option(
            help="Draw the ROC and PR curves: a .png or .svg file, or a directory ending in / "
            "(curves.png in it).",
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
    fail_under: FailUnderOpt = None,
    fail_over: FailOverOpt = None,
    gate_on: GateOnOpt = "bound",
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
    """Estimate ROC AUC, curve areas and precision/recall/accuracy from one private release.

    Simulates the protocol on FILE (one example per client unless a client column is given) and
    prints each estimate beside its exact value.

    Example: [bold]fedeval evaluate scores.parquet --model distdp --epsilon 1 --format json[/bold]

    CI gate: [bold]fedeval evaluate s.parquet --fail-under auc=0.85 --fail-over ece=0.03[/bold]

    Exit codes: 0 ok · 1 a quality gate failed · 2 bad input or usage, or a release refused by
    the ledger (nothing is written).
    """
    from fedeval.evaluate import evaluate_file
    from fedeval.io import source_name
    from fedeval.report import render_table, to_dict

    with _errors_to_exit(), _progress_bar("encoding client reports", per_client) as progress:
        _check_buckets(buckets)
        plot_path = _plot_path(plot, "curves.png")
        gates, on = _gates(fail_under, fail_over, gate_on)
        _check_ledger_options(ledger, budget)
        _keys_apply(save_release, sign_key, from_, verify_key)
        _source_or_aggregate(
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
            from fedeval.evaluate import evaluate_run

            run = _loaded_run(from_, seed, ci_draws, verify_key)
            ev = evaluate_run(
                run,
                buckets=buckets,
                thresholds=_with_gate_thresholds(thresholds, gates, run.score_range),
                quantiles=quantiles,
            )
            name = str(from_)
        else:
            opts = _table_options(
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
            ev = evaluate_file(
                file,
                model=model,
                epsilon=epsilon,
                height=height,
                shape=shape,
                buckets=buckets,
                thresholds=_with_gate_thresholds(thresholds, gates, _score_range(score_range)),
                quantiles=quantiles,
                seed=seed,
                ci_draws=ci_draws,
                **opts,
            )
            name = source_name(file)
        report = to_dict(ev, source=name)
        covered = (
            f"evaluate: AUC, ECE, ROC/PR curves (Q = {ev.curves.quantiles}), P/R/A at "
            f"{len(ev.thresholds)} thresholds"
        )
        doc = document_text(report)
        with Outputs() as out:
            to_stdout = _emit(doc, output, out)
            _save(out, save_release, ev.run, sign_key)
            if plot_path is not None:
                from fedeval.plot import plot_curves

                plot_curves(ev.curves, out.staged_path(plot_path))
            _charge_if_new(ledger, budget, report, "evaluate", covered, name, ev.run)
            out.commit()
        if to_stdout or (output is None and output_format is OutputFormat.json):
            sys.stdout.write(doc)
        elif output is None:
            render_table(ev, Console(), source=name)
        _apply_gates(gates, on, report)


class CurvesFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


@app.command()
def curves(
    file: FileArg = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    quantiles: QuantilesOpt = 100,
    curve_method: Annotated[
        str,
        typer.Option(
            "--curve-method",
            help="leaves (every released leaf edge; more accurate, the default) or pchip "
            "(the papers' Q-quantile PCHIP estimator).",
        ),
    ] = "leaves",
    height: Annotated[
        str,
        typer.Option(
            help="Leaf height h; 'auto' is ⌈log₂ Q⌉ + 2 (the papers' choice, branching 2)."
        ),
    ] = "auto",
    shape: ShapeOpt = "auto",
    seed: SeedOpt = None,
    output_format: Annotated[
        CurvesFormat,
        typer.Option(
            "--format",
            "-f",
            help="table (areas and a dozen points), json (areas and every point), csv (points).",
        ),
    ] = CurvesFormat.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the json/csv output to this file instead of stdout (- for stdout; with "
            "--format table, csv for a .csv name, else json).",
            show_default=False,
        ),
    ] = None,
    plot: Annotated[
        str | None,
        typer.Option(
            help="Draw ROC and PR curves, estimated over exact: a .png or .svg file, or a "
            "directory ending in / (curves.png in it).",
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
    """ROC and PR curves from one private release, through every leaf edge (or Q quantiles per
    class, PCHIP-interpolated: --curve-method pchip).

    Prints the area under each estimated curve beside the exact one, and the area between the
    estimated and the exact curve.

    Example: [bold]fedeval curves scores.parquet --model distdp -q 128 --plot curves.png[/bold]

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.curves import roc_pr_curves_file
    from fedeval.io import source_name
    from fedeval.report import curves_csv, curves_dict, render_curves_table

    with _errors_to_exit(), _progress_bar("encoding client reports", per_client) as progress:
        plot_path = _plot_path(plot, "curves.png")
        _check_ledger_options(ledger, budget)
        _keys_apply(save_release, sign_key, from_, verify_key)
        _source_or_aggregate(
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
        fmt = output_format
        if fmt is CurvesFormat.table and output is not None:  # a file, or - : data, not a table
            fmt = CurvesFormat.csv if output.suffix.lower() == ".csv" else CurvesFormat.json
        if from_ is not None:
            from fedeval.curves import curve_result

            c = curve_result(
                _loaded_run(from_, seed, ci_draws, verify_key), quantiles, curve_method
            )
            name = str(from_)
        else:
            opts = _table_options(
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
            c = roc_pr_curves_file(
                file,
                quantiles=quantiles,
                method=curve_method,
                model=model,
                epsilon=epsilon,
                height=height,
                shape=shape,
                seed=seed,
                ci_draws=ci_draws,
                **opts,
            )
            name = source_name(file)
        cdoc = curves_dict(c, source=name)
        covered = f"curves: ROC and PR, Q = {c.quantiles}"
        text = None  # --format table on a terminal
        if fmt is CurvesFormat.json:
            text = document_text(cdoc)
        elif fmt is CurvesFormat.csv:
            text = curves_csv(c)
        with Outputs() as out:
            to_stdout = _emit(text, output, out)
            _save(out, save_release, c.run, sign_key)
            if plot_path is not None:
                from fedeval.plot import plot_curves

                plot_curves(c, out.staged_path(plot_path))
            _charge_if_new(ledger, budget, cdoc, "curves", covered, name, c.run)
            out.commit()
        if text is None:
            render_curves_table(c, Console(), source=name)
        elif to_stdout or output is None:
            sys.stdout.write(text)


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
    multiclass: Annotated[
        bool,
        typer.Option(
            "--multiclass",
            help="FILE holds integer labels 0..c−1 and logit_*/prob_* columns: fit a multiclass "
            "map over T federated rounds (seed paper on federated multiclass calibration).",
        ),
    ] = False,
    rounds: Annotated[int, typer.Option(min=1, help="--multiclass: T calibration rounds.")] = 12,
    participation: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="--multiclass: share p of clients in each round, drawn without replacement "
            "across rounds (a client is charged only for the rounds it is in) \\[default: 0.1; "
            "1 for fedtemp with --epsilon].",
            show_default=False,
        ),
    ] = None,
    clients: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="--multiclass: K simulated clients when FILE has no client column "
            "\\[default: 100].",
            show_default=False,
        ),
    ] = None,
    beta: Annotated[
        float | None,
        typer.Option(
            help="--multiclass: Dirichlet(β) label skew over the K clients \\[default: iid].",
            show_default=False,
        ),
    ] = None,
    delta: Annotated[
        float | None,
        typer.Option(help="--multiclass with --epsilon: δ \\[default: 1e-5].", show_default=False),
    ] = None,
    clip: Annotated[
        str | None,
        typer.Option(
            help="--multiclass: clip norm C of each client's log T update (fedtemp) or C+,C- of "
            "its histograms (binning); noise scales with it under --epsilon \\[default: 0.5; "
            "10,50, or 10,1 for the class-pooled histograms under DP].",
            show_default=False,
        ),
    ] = None,
    unweighted: Annotated[
        bool,
        typer.Option(
            "--unweighted",
            help="--multiclass binning: no heterogeneity weighting (can cost accuracy under "
            "label skew).",
        ),
    ] = False,
    holdout: Annotated[
        float | None,
        typer.Option(
            help="--multiclass: share of each client's rows held out of the fit; fedtemp's "
            "held-out check (DP under --epsilon) and the simulation's before/after metrics use "
            "them; 0: no check, metrics in-sample \\[default: 0.2].",
            show_default=False,
        ),
    ] = None,
    server_lr: Annotated[
        float | None,
        typer.Option(
            "--server-lr",
            help="--multiclass fedtemp: server step η on log T, last round released "
            "\\[default: a schedule — without DP the running mean of the rounds, with DP η = 1 "
            "for the first half of the rounds, then their mean].",
            show_default=False,
        ),
    ] = None,
    fail_if_worse: Annotated[
        bool,
        typer.Option(
            "--fail-if-worse",
            help="--multiclass fedtemp: exit 1 when the held-out check finds no gain over the "
            "identity (the map written then holds T = 1, the safe fallback).",
        ),
    ] = False,
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
        with _errors_to_exit():
            given = [k for k, v in binary_only.items() if v]
            if given:
                raise UsageError(f"{', '.join(given)} cannot be used with --multiclass.")
            if file is None:
                raise UsageError("--multiclass needs FILE.")
            _calibrate_multiclass(
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

    with _errors_to_exit(), _progress_bar("encoding client reports", per_client) as progress:
        given = [k for k, v in multiclass_only.items() if v]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise UsageError(f"{', '.join(given)} {verb} to --multiclass only.")
        _check_buckets(buckets)
        plot_path = _plot_path(plot, "reliability.png")
        _check_ledger_options(ledger, budget)
        _keys_apply(save_release, sign_key, from_, verify_key)
        _source_or_aggregate(
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

            run = _loaded_run(from_, seed, ci_draws, verify_key)
            cal = calibrate_run(run, method=method, buckets=buckets, n_bins=bins)
            name = str(from_)
        else:
            opts = _table_options(
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
            to_stdout = _emit(map_text, output, out)
            _save(out, save_release, cal.run, sign_key)
            if plot_path is not None:
                from fedeval.plot import plot_reliability

                plot_reliability(cal, out.staged_path(plot_path))
            _charge_if_new(ledger, budget, doc, "calibrate", covered, name, cal.run)
            out.commit()
        if to_stdout:
            sys.stdout.write(map_text)
        elif output is not None:
            pass  # -o FILE: stdout stays empty
        elif output_format is OutputFormat.json:
            sys.stdout.write(document_text(doc))
        else:
            render_calibration_table(cal, Console(), source=name)


def _calibrate_multiclass(
    file: str,
    *,
    clip,
    buckets: str,
    holdout,
    fail_if_worse: bool,
    output,
    output_format,
    ledger,
    budget,
    **options,
) -> None:
    from fedeval.io import source_name
    from fedeval.multiclass import (
        calibrate_multiclass_file,
        multiclass_map_dict,
        render_multiclass_table,
        shareable_map,
        write_map,
    )

    _check_ledger_options(ledger, budget)
    clip_value = None
    if clip is not None:
        values = _floats(clip, "--clip")
        if len(values) not in (1, 2):
            raise UsageError(f"--clip takes C or C+,C-. Found {clip!r}.")
        clip_value = values[0] if len(values) == 1 else (values[0], values[1])
    bins = None  # the method's default number of histogram bins (B = 2^M)
    if buckets != "auto":
        try:
            bins = int(buckets)
        except ValueError:
            raise UsageError(f"--buckets takes an integer or 'auto'. Found {buckets!r}.") from None
    if holdout is not None:
        options["holdout"] = holdout
    if fail_if_worse and str(options.get("method", "")).lower() != "fedtemp":
        raise UsageError(
            "--fail-if-worse needs fedtemp's held-out check; binning has none (use --method "
            "fedtemp)."
        )
    if fail_if_worse and holdout == 0:
        raise UsageError("--fail-if-worse needs held-out rows; drop --holdout 0.")
    result = calibrate_multiclass_file(file, clip=clip_value, bins=bins, **options)
    name = source_name(file)
    # The JSON report holds the simulation's exact metrics ("exact_values": true); the map file
    # is made to be shared: under DP it holds the calibrator and the privacy section only.
    doc = multiclass_map_dict(result, source=name)
    shared = shareable_map(doc)
    covered = f"calibrate --multiclass: {result.name} map"
    _charge(ledger, budget, shared, "calibrate --multiclass", covered, name)
    if output is not None:
        write_map(shared, output)
    if output_format is OutputFormat.json:
        sys.stdout.write(document_text(doc))
    else:
        render_multiclass_table(result, Console(), source=name)
    if fail_if_worse and result.fell_back:
        from fedeval.errors import GateFailed

        g = result.safeguard
        raise GateFailed(
            f"the held-out check found no gain for T = {g.fitted:.4g} (NLL gain {g.gain:+.4f} "
            f"{g.unit}, 95% lower bound {g.lower:+.4f}); the map holds T = 1, the model's own "
            "probabilities."
        )


@app.command()
def apply(
    map_file: Annotated[
        Path,
        typer.Argument(
            help="A calibration map made by fedeval calibrate.", metavar="MAP", show_default=False
        ),
    ],
    input_file: Annotated[
        str,
        typer.Argument(
            help="Scores to calibrate: Parquet or CSV, or - for CSV on stdin.",
            metavar="INPUT",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Output file (.parquet/.pq for Parquet, else CSV) \\[default: CSV on stdout].",
            show_default=False,
        ),
    ] = None,
    score_col: Annotated[
        str,
        typer.Option(
            help="Column holding the scores \\[default: the one the map was fitted on, as the "
            "map records it, else 'score'].",
            show_default=False,
        ),
    ] = "score",
    output_col: Annotated[str, typer.Option(help="Name of the new column.")] = "calibrated",
) -> None:
    """Add a column of calibrated probabilities to every row of INPUT (all columns kept).

    Example: [bold]cat scores.csv | fedeval apply map.json - > calibrated.csv[/bold]

    Exit codes: 0 ok · 2 bad input or usage (a file output is never left half-written).
    """
    from fedeval.calibration import apply_map_file
    from fedeval.multiclass import apply_multiclass_map_file, map_kind

    with _errors_to_exit():
        if map_kind(map_file) == "multiclass":
            apply_multiclass_map_file(map_file, input_file, output)
        else:
            if not option_given("score_col"):  # the column the map was fitted on
                from fedeval.mapfile import load_map

                stored = load_map(map_file).document.get("score_column")
                score_col = stored if isinstance(stored, str) and stored else score_col
            apply_map_file(map_file, input_file, output, score_col=score_col, output_col=output_col)


@app.command()
def plan(
    rows: Annotated[
        int | None,
        typer.Option(
            "--rows",
            "-n",
            min=100,
            help="Population: examples (one per client) \\[default: the rows of --like].",
            show_default=False,
        ),
    ] = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    positives_fraction: Annotated[
        float | None,
        typer.Option(
            help="Share of positive examples, strictly between 0 and 1 \\[default: that of "
            "--like, else 0.5].",
            show_default=False,
        ),
    ] = None,
    auc: Annotated[
        float, typer.Option(help="ROC AUC of the reference scores (binormal model).")
    ] = 0.85,
    like: Annotated[
        str | None,
        typer.Option(
            help="Use this scored table's score distribution as the reference instead "
            "(a pilot or validation set; any size).",
            show_default=False,
        ),
    ] = None,
    target_error: Annotated[
        float | None,
        typer.Option(help="Also find the population needed for this expected |error|."),
    ] = None,
    metric: Annotated[
        str, typer.Option(help="Metric for --target-error: pra (precision/recall/accuracy) or auc.")
    ] = "pra",
    heights: Annotated[
        bool, typer.Option("--heights", help="Also show the predicted error at every height.")
    ] = False,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="table, or json (one document).")
    ] = OutputFormat.table,
    seed: Annotated[int, typer.Option(help="Seed of the reference population.")] = 0,
) -> None:
    """Predict the error to expect for a population, recommend h, B and Q, find the n needed.

    Runs fedeval's own estimators on a reference population of the given size (binormal scores
    with the given AUC, or the score distribution of --like), so the prediction is what
    evaluate, curves and calibrate will do with --height auto. Measured errors fall within about
    2.5× of the binormal prediction and 1.9× with --like: pass a pilot file when you have one.

    Example: [bold]fedeval plan --rows 200000 --model distdp --epsilon 1 --target-error 1e-4[/bold]

    Exit codes: 0 ok · 2 bad input or usage.
    """
    from fedeval import plan as planning
    from fedeval.calibration import auto_buckets
    from fedeval.data import read_scored
    from fedeval.params import auto_quantiles

    with _errors_to_exit():
        like_data = None if like is None else read_scored(like, keep_scores=False)
        if rows is None:
            if like_data is None:
                raise UsageError("give the population with --rows N, or a pilot file with --like.")
            rows = max(like_data.rows, 100)
        if positives_fraction is None:
            positives_fraction = 0.5 if like_data is None else like_data.positives / like_data.rows
        kwargs = {
            "model": model,
            "epsilon": epsilon,
            "positives_fraction": positives_fraction,
            "auc": auc,
            "like": like_data,
            "seed": seed,
        }
        best, others = planning.plan(rows, heights=range(2, 17) if heights else None, **kwargs)
        cfg = best.config
        predicted = (best.auc, best.precision, best.recall, best.accuracy)
        if not all(math.isfinite(x) for x in predicted):
            raise UsageError(
                f"no finite error can be predicted for {rows:,} examples at ε = {cfg.epsilon:g}: "
                "the noise swamps every count. Plan with a larger ε or population."
            )
        needed = None
        if target_error is not None:
            needed = planning.population_needed(target_error, metric=metric, **kwargs)
        rec = {
            "shape": cfg.shape.value,
            "height": cfg.height,
            "leaves": cfg.n_leaves,
            "quantiles": auto_quantiles(cfg.model, rows, cfg.epsilon),
            "calibration_buckets": auto_buckets(cfg.model, rows, cfg.epsilon, cfg.n_leaves),
        }

        def errors(p):
            return {
                "auc": p.auc,
                "precision": p.precision,
                "recall": p.recall,
                "accuracy": p.accuracy,
            }

        doc = {
            "schema": "fedeval.plan/1",
            "privacy": {"model": cfg.model.value, "epsilon": cfg.epsilon},
            "rows": rows,
            "positives_fraction": positives_fraction,
            "reference": {"source": like} if like else {"model": "binormal", "auc": auc},
            "recommended": rec,
            "expected_abs_error": errors(best),
            "scaling_table1": dict(zip(("pra", "auc"), planning.TABLE1[cfg.model], strict=True)),
            "by_height": [{"height": p.config.height} | errors(p) for p in others],
            "target": None
            if target_error is None
            else {"error": target_error, "metric": metric, "rows_needed": needed},
        }
        if output_format is OutputFormat.json:
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
            return
        out = Console()
        eps = "" if cfg.epsilon is None else f", ε = {cfg.epsilon:g}"
        ref = f"scores like {like}" if like else f"binormal reference scores, AUC {auc:g}"
        out.print(
            f"[bold]{cfg.model.value}[/bold]{eps} · {rows:,} examples "
            f"({positives_fraction:.1%} positive) · {ref}",
            soft_wrap=True,
        )
        out.print(
            f"recommended: {cfg.shape.value} release, h = {cfg.height} ({cfg.n_leaves:,} leaves); "
            f"curves Q = {rec['quantiles']}; calibration B = {rec['calibration_buckets']}",
            soft_wrap=True,
        )
        t = Table(box=None, header_style="bold")
        t.add_column("expected |error|")
        t.add_column("", justify="right")
        t.add_column("scaling (Table 1)", style="dim")
        pra_rate, auc_rate = planning.TABLE1[cfg.model]
        t.add_row("ROC AUC", f"{best.auc:.1e}", auc_rate)
        t.add_row("precision", f"{best.precision:.1e}", pra_rate)
        t.add_row("recall", f"{best.recall:.1e}", pra_rate)
        t.add_row("accuracy", f"{best.accuracy:.1e}", pra_rate)
        out.print(t)
        if others:
            h = Table(box=None, header_style="bold")
            for col in ("h", "AUC", "precision", "recall", "accuracy"):
                h.add_column(col, justify="right")
            for p in others:
                mark = " *" if p.config.height == cfg.height else ""
                h.add_row(
                    f"{p.config.height}{mark}",
                    *(f"{x:.1e}" for x in (p.auc, p.precision, p.recall, p.accuracy)),
                )
            out.print(h)
        if target_error is not None:
            what = "ROC AUC" if metric == "auc" else "precision/recall/accuracy"
            if needed is None:
                out.print(f"no population up to 10⁹ reaches {target_error:g} on {what}.")
            else:
                out.print(f"population needed for {what} error ≤ {target_error:g}: ~{needed:,}")


@app.command()
def check(
    report: Annotated[
        Path,
        typer.Argument(
            help="A report (fedeval evaluate -o) or calibration map (fedeval calibrate -o).",
            metavar="REPORT",
            show_default=False,
        ),
    ],
    fail_under: FailUnderOpt = None,
    fail_over: FailOverOpt = None,
    gate_on: GateOnOpt = "bound",
) -> None:
    """Judge quality gates on a saved report: exit 1 if a floor or ceiling is broken.

    Example: [bold]fedeval check report.json --fail-under auc=0.85,recall@0.5=0.7[/bold]

    Exit codes: 0 every gate passed · 1 a gate failed · 2 bad input or usage.
    """
    from fedeval.errors import FedevalError, GateFailed, InputError

    with _errors_to_exit():
        gates, on = _gates(fail_under, fail_over, gate_on)
        if not gates:
            raise UsageError("name at least one gate with --fail-under or --fail-over.")
        from fedeval.documents import read_json

        doc = read_json(report, noun="report", kind="a fedeval report")
        if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("fedeval."):
            raise InputError(f"'{report}' is not a fedeval report (no fedeval schema).")
        from fedeval.integrity import verify

        # Gates judge numbers someone could have edited: a sealed report must still match its
        # seal, and reports of this version are always sealed.
        verify(doc, str(report), required=doc["schema"] == "fedeval.report/2")
        try:
            _apply_gates(gates, on, doc)
        except GateFailed:
            raise
        except FedevalError as e:  # the report lacks what a gate needs
            raise InputError(f"'{report}': {e}", file=str(report)) from None


@app.command("ledger")
def ledger_show(
    path: Annotated[
        Path, typer.Argument(help="A privacy ledger.", metavar="LEDGER", show_default=False)
    ],
    budget: Annotated[
        float | None,
        typer.Option(
            help="The budget you expect; refused if it differs from the one the ledger stores.",
            show_default=False,
        ),
    ] = None,
    output_format: Annotated[
        OutputFormat,
        typer.Option(
            "--format", "-f", help="table, or json (budget, per-dataset totals, entries)."
        ),
    ] = OutputFormat.table,
) -> None:
    """Print a privacy ledger: its stored budget, each dataset's composed ε (with its unit and
    neighbouring relation) and every release charged to it.

    Pure ε-DP releases compose by adding up (exact, δ = 0); a dataset with Gaussian releases is
    composed by dp_accounting's RDP accountant at the ledger's δ.

    Exit codes: 0 ok · 2 bad input or usage.
    """
    from fedeval.errors import InputError
    from fedeval.ledger import check_budget, composition, describe_event, read_ledger, totals

    with _errors_to_exit():
        if not Path(path).exists():
            raise InputError(f"cannot read ledger '{path}': no such file.")
        check_budget(path, budget)
        header, entries = read_ledger(path)
        limit = header["budget"] if header else None
        delta = limit["delta"] if limit else 0.0
        datasets = {}
        for name, spent in totals(header, entries).items():
            group = [e for e in entries if e.get("dataset", "default") == name]
            datasets[name] = {
                "unit": group[0]["unit"],
                "relation": group[0]["relation"],
                "releases": len(group),
                "epsilon_spent": spent,
                "epsilon_left": None if limit is None else max(limit["epsilon"] - spent, 0.0),
                "composition": composition(group, delta),
            }
        if output_format is OutputFormat.json:
            doc = {
                "schema": "fedeval.ledger-summary/2",
                "budget": limit,
                "created": header.get("created") if header else None,
                "datasets": datasets,
                "entries": entries,
            }
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
            return
        out = Console()
        if header is None:
            out.print(f"ledger {path}: empty (no budget stored yet)", highlight=False)
            return
        out.print(
            f"ledger {path} · budget ε = {limit['epsilon']:g}, δ = {limit['delta']:g} for each "
            f"dataset · created {header.get('created')}",
            soft_wrap=True,
            highlight=False,
        )

        def num(x) -> str:
            return "—" if x is None else f"{x:g}"

        # What each release covered is in --format json; δ only when some release has one.
        with_delta = any(e.get("delta") for e in entries)
        t = Table(box=None, header_style="bold")
        cols = ("time", "dataset", "command", "model", "unit", "relation", "ε")
        for col in (*cols, *(["δ"] if with_delta else []), "dp event"):
            t.add_column(col)
        for e in entries:
            t.add_row(
                str(e.get("time"))[:19].replace("T", " "),
                str(e.get("dataset")),
                str(e.get("command")),
                str(e.get("model")),
                str(e.get("unit")),
                str(e.get("relation")),
                num(e.get("epsilon")),
                *([num(e.get("delta"))] if with_delta else []),
                describe_event(e.get("dp_event")),
            )
        out.print(t)
        for name, d in datasets.items():
            n = d["releases"]
            out.print(
                f"dataset '{name}' (unit {d['unit']}, relation {d['relation']}): "
                f"{n} release{'s' if n != 1 else ''} · ε spent {d['epsilon_spent']:g} of "
                f"{limit['epsilon']:g} (left: {d['epsilon_left']:g}) · composition: "
                f"{d['composition']}",
                soft_wrap=True,
                highlight=False,
            )
        if not datasets:
            out.print("no releases charged yet", highlight=False)


@app.command()
def partition(
    file: Annotated[
        str,
        typer.Argument(
            help="Labelled table: Parquet or CSV, or - for CSV on stdin.",
            metavar="FILE",
            show_default=False,
        ),
    ],
    scheme: Annotated[
        str,
        typer.Option(
            help="iid: uniform, sizes differ by at most 1. dirichlet: label skew, each class "
            "split over the clients by Dirichlet(β) proportions. sizes: Zipf-skewed client "
            "sizes, iid labels. column: keep the existing client column.",
            metavar="[iid|dirichlet|sizes|column]",
            show_default=False,
        ),
    ],
    clients: Annotated[
        int | None,
        typer.Option(
            "--clients",
            "-k",
            min=1,
            help="K, the number of clients (not with --scheme column).",
            show_default=False,
        ),
    ] = None,
    beta: Annotated[
        float | None,
        typer.Option(
            help="Dirichlet concentration β > 0 (--scheme dirichlet): smaller, more label skew "
            "\\[default: 0.5].",
            show_default=False,
        ),
    ] = None,
    zipf: Annotated[
        float | None,
        typer.Option(
            help="Zipf exponent s > 0 (--scheme sizes): client of rank r gets a share ∝ r^-s "
            "\\[default: 1.2].",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(help="Seed of the assignment; the one used is always reported."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Output file (.parquet/.pq for Parquet, else CSV) \\[default: CSV on stdout].",
            show_default=False,
        ),
    ] = None,
    label_col: LabelColOpt = "label",
    pos_label: PosLabelOpt = None,
    client_col: Annotated[
        str,
        typer.Option(help="Client column to add (or, with --scheme column, to keep)."),
    ] = "client",
) -> None:
    """Spread the rows of FILE over K simulated clients: write it back with a client column.

    Every column is kept; a summary (clients, examples per client, label skew) goes to stderr.
    dirichlet follows the label-skew partition of the seed paper on federated calibration
    (appendix A.2). Under federated the release is blind to the partition: evaluating the output
    gives the same counts and metrics for every scheme.

    Example: [bold]fedeval partition scores.parquet -k 100 --scheme dirichlet --beta 0.1 -o
    clients.parquet && fedeval evaluate clients.parquet -m distdp[/bold]

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.io import source_name
    from fedeval.partition import partition_file

    with _errors_to_exit():
        res = partition_file(
            file,
            output,
            scheme=scheme,
            n_clients=clients,
            seed=seed,
            beta=beta,
            zipf=zipf,
            label_col=label_col,
            pos_label=pos_label,
            client_col=client_col,
        )
        s = res.summary
        dest = "stdout" if output is None or str(output) == "-" else f"'{output}'"
        err.print(
            f"{source_name(file)}: {s.rows:,} examples over {res.n_clients:,} clients "
            f"({res.describe()}) → {dest}",
            highlight=False,
        )
        t = Table(box=None, show_header=False, pad_edge=False)
        t.add_column(style="bold")
        t.add_column()
        empty = f" · {s.empty_clients:,} empty" if s.empty_clients else ""
        t.add_row("clients", f"{s.clients:,} with examples{empty}")
        t.add_row(
            "per client", f"min {s.min_size:,} · median {s.median_size:,g} · max {s.max_size:,}"
        )
        t.add_row(
            "positives",
            f"{s.positive_share:.1%} overall · {s.single_class_share:.0%} of clients hold one "
            "class only",
        )
        t.add_row(
            "label skew",
            f"{s.label_skew:.3f} of at most {s.label_skew_max:.3f} (mean |client − overall "
            "share|, by size)",
        )
        err.print(t, highlight=False)


@app.command()
def encode(
    file: Annotated[
        str,
        typer.Argument(
            help="Scored, labelled table with a client column (Parquet or CSV, or - for CSV on "
            "stdin); without one, every row is its own client.",
            metavar="FILE",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="New directory for the reports (parts, roster, manifest.json).",
            show_default=False,
        ),
    ],
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    height: HeightOpt = "auto",
    shape: ShapeOpt = "auto",
    population: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="N, the clients of the whole run over all its cohorts; the server checks the "
            "cohorts do not exceed it (noise shares are sized to this cohort, not to N) "
            "\\[default: the clients in FILE].",
            show_default=False,
        ),
    ] = None,
    unit: UnitOpt = Unit.EXAMPLE,
    max_examples: MaxExamplesOpt = None,
    relation: RelationOpt = None,
    neighbours: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="K, masking neighbours per side in secure aggregation \\[default: ⌈log2 n⌉].",
            show_default=False,
        ),
    ] = None,
    dropout: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.99,
            help="Simulate this fraction of clients dropping out after masking; survivors "
            "reveal the mask keys shared with them (federated; localdp needs no masks).",
        ),
    ] = 0.0,
    min_cohort: MinCohortOpt = 10,
    sign_key: Annotated[
        Path | None,
        typer.Option(
            "--sign-key",
            help="Ed25519 private key (fedeval keygen) to sign the manifest with.",
            show_default=False,
        ),
    ] = None,
    seed: SeedOpt = None,
    score_col: ScoreColOpt = "score",
    label_col: LabelColOpt = "label",
    client_col: ClientColOpt = None,
    score_range: ScoreRangeOpt = "0,1",
    pos_label: PosLabelOpt = None,
    thresholds: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated thresholds the analyst will ask for, declared now: they become "
            "cell edges of the release, so precision/recall/accuracy there are exact sums of "
            "cells (no interpolation); the manifest states them. Every client must be encoded "
            "with the same ones \\[default: none; cells evenly spaced over the score range].",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Encode every client's report as the deployed client would: the staged protocol's step 1.

    Each client makes its report with the per-client encoder (one-hot level counts; a Pólya
    noise share sized to this cohort under distdp, so the cohort's sum is private on its own;
    OUE bits under localdp, exactly L reports per client under --unit client) and, under
    federated and distdp, masks it for secure aggregation (pairwise masks mod 2^32 from keys
    drawn from the OS CSPRNG and expanded with AES-CTR; they cancel in the sum, so no single
    report reveals anything). Cohorts below --min-cohort clients are refused. The directory
    appears only when complete, with a sealed manifest (--sign-key also signs it). Then run
    [bold]fedeval aggregate[/bold].

    Example: [bold]fedeval encode clients.parquet -m distdp -o reports/ && fedeval aggregate
    reports/ -o run.fedeval && fedeval evaluate --from run.fedeval[/bold]

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.encode import encode_file
    from fedeval.io import Columns, source_name

    with _errors_to_exit(), _progress_bar("encoding client reports", True) as progress:
        if is_stdout(output):
            raise UsageError("encode writes a directory of reports: -o - (stdout) cannot hold it.")
        s = encode_file(
            file,
            output,
            columns=Columns(score_col, label_col, client_col),
            model=model,
            epsilon=epsilon,
            height=height,
            shape=shape,
            population=population,
            unit=unit,
            max_examples=max_examples,
            relation=relation,
            score_range=_score_range(score_range),
            thresholds=None if thresholds is None else _floats(thresholds, "--thresholds"),
            pos_label=pos_label,
            seed=seed,
            neighbours=neighbours,
            dropout=dropout,
            min_cohort=min_cohort,
            sign_key=_private_key(sign_key),
            progress=progress,
        )
    cfg = s.config
    eps = "" if cfg.epsilon is None else f" ε={cfg.epsilon:g}"
    err.print(
        f"{source_name(file)}: {s.examples:,} examples of {s.clients:,} clients → '{output}' "
        f"({_plural(s.parts, 'part')}, {s.report_bytes:,} bytes)",
        highlight=False,
    )
    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    rel = "" if cfg.relation is None else f" · {cfg.relation.value}"
    t.add_row(
        "release",
        f"{cfg.model.value}{eps} · height {cfg.height} · {cfg.shape.value} · unit {cfg.unit.value}"
        + (f" (≤ {cfg.max_examples} examples per client)" if cfg.max_examples else "")
        + rel,
    )
    t.add_row("population", f"{s.population:,} clients ({s.clients:,} in this cohort)")
    per = "per example" if cfg.model is PrivacyModel.LOCALDP else "per client"
    t.add_row(per, f"{s.bytes_per_client:,.0f} bytes sent per report")
    if cfg.model is not PrivacyModel.LOCALDP:
        t.add_row(
            "masking",
            f"pairwise mod 2^32, {s.neighbours} neighbours per side, keys from the OS CSPRNG",
        )
    if s.dropped_examples:
        t.add_row("cap", f"{s.dropped_examples:,} examples left out")
    if s.dropped_out:
        t.add_row("dropout", f"{s.dropped_out:,} clients sent no report")
    if s.seed is not None:
        t.add_row("seed", f"{s.seed} (reproducible simulation: noise not private)")
    err.print(t, highlight=False)


@app.command()
def aggregate(
    reports: Annotated[
        list[Path],
        typer.Argument(
            help="Report directories made by fedeval encode (one per cohort).",
            metavar="REPORTS...",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="The aggregate to write (a versioned release; use it with --from).",
            show_default=False,
        ),
    ],
    population: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="The population the server expects; the manifests must agree.",
            show_default=False,
        ),
    ] = None,
    min_cohort: MinCohortOpt = 10,
    sign_key: SignKeyOpt = None,
    verify_key: Annotated[
        Path | None,
        typer.Option(
            "--verify-key",
            help="Ed25519 public key (fedeval keygen): refuse manifests not signed by it.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Verify, sum and unmask client reports into the aggregate release: the server's step.

    Each manifest's seal (and signature, with --verify-key) and every file's SHA-256 are
    checked first; stray files, duplicate clients, mixed parameters, cohorts below
    --min-cohort and a wrong population are refused and nothing is written. The masks cancel
    in the sum (dropped clients' masks are removed with the keys their neighbours revealed);
    the server learns each cohort's sum and nothing per client. The release keeps only what
    the mechanism may publish (no exact count under add-remove).

    Example: [bold]fedeval aggregate reports/ -o run.fedeval && fedeval curves --from
    run.fedeval[/bold]

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.aggregate import aggregate_reports
    from fedeval.releasefile import save_release

    with _errors_to_exit(), _progress_bar("summing report parts", True) as progress:
        s = aggregate_reports(
            reports,
            population=population,
            min_cohort=min_cohort,
            verify_key=_public_key(verify_key),
            progress=progress,
        )
        if is_stdout(output):  # -o -: the release document on stdout
            from fedeval.releasefile import release_dict

            doc = release_dict(s.release, s.axis)
            sys.stdout.write(document_text(doc, sign_key=_private_key(sign_key)))
        else:
            save_release(output, s.release, s.axis, sign_key=_private_key(sign_key))
    recovered = f" ({s.recovered:,} dropped, masks removed)" if s.recovered else ""
    # Participation is what the server sees anyway; no count of examples is printed (under
    # add-remove none is known, and the log is a document too).
    err.print(
        f"{_plural(s.cohorts, 'cohort')}: {s.reported:,} of {s.clients:,} clients reported"
        f"{recovered} → '{output}'",
        highlight=False,
    )


@app.command()
def keygen(
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="NAME of the key pair: writes NAME.key (private, mode 0600) and NAME.pub.",
            metavar="NAME",
            show_default=False,
        ),
    ],
) -> None:
    """Make an Ed25519 key pair to sign releases and report manifests, and to check who made them.

    Every document fedeval writes carries a SHA-256 digest of its content, which catches edits
    but proves nothing about its author: anyone can recompute it. A signature does. Keep
    NAME.key secret; hand NAME.pub to whoever reads your files (over a channel they trust).

    Sign with [bold]--sign-key NAME.key[/bold] on [bold]fedeval aggregate[/bold] and
    [bold]fedeval evaluate --save-release[/bold]; verify with [bold]--verify-key NAME.pub[/bold]
    on [bold]fedeval aggregate[/bold] (the report manifests) and wherever [bold]--from[/bold]
    reads a release. The key's fingerprint is printed on stderr.

    Example: [bold]fedeval keygen -o ci && fedeval aggregate reports/ -o run.fedeval --sign-key
    ci.key && fedeval evaluate --from run.fedeval --verify-key ci.pub[/bold]

    Exit codes: 0 ok · 2 NAME.key or NAME.pub already exists (never overwritten), or cannot be
    written.
    """
    from fedeval.integrity import fingerprint, generate_keypair

    with _errors_to_exit():
        if is_stdout(output):
            raise UsageError("keygen writes two files, NAME.key and NAME.pub: -o - cannot.")
        base = output.with_suffix("") if output.suffix in (".key", ".pub") else output
        private, public = Path(f"{base}.key"), Path(f"{base}.pub")
        key = generate_keypair(private, public)
    err.print(
        f"Ed25519 key {fingerprint(key)}: '{private}' (private, keep it secret) and '{public}' "
        "(public: hand it to whoever verifies).",
        highlight=False,
    )


def _check_plot_suffix(path: Path) -> None:
    """Before any work: the plot's format comes from its extension."""
    if path.suffix.lower() not in {".png", ".svg"}:
        raise UsageError(f"--plot '{path}': use a .png or .svg file name.")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
