"""`fedeval encode`: every client's report, as the deployed client makes it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fedeval.cli.app import app
from fedeval.cli.common import (
    err,
    errors_to_exit,
    plural,
    private_key,
    progress_bar,
    summary_table,
)
from fedeval.cli.groups import TABLE, UNITS, TableOptions, UnitOptions, grouped, run_settings
from fedeval.cli.helptext import DEPLOY, command_help
from fedeval.cli.options import (
    EpsilonOpt,
    HeightOpt,
    LevelSplitOpt,
    MinCohortOpt,
    ModelOpt,
    SeedOpt,
    ShapeOpt,
    argument,
    option,
)
from fedeval.core.config import DEFAULT_LEVEL_SPLIT, PrivacyModel
from fedeval.core.errors import UsageError
from fedeval.tables.outputs import is_stdout


@app.command(rich_help_panel=DEPLOY)
@command_help
@grouped
def encode(
    file: Annotated[
        str,
        argument(
            "Scored, labelled table with a client column (Parquet or CSV; - for stdin).", "FILE"
        ),
    ],
    output: Annotated[
        Path,
        option(
            "New directory for the reports (parts, roster, manifest.json).",
            "--output",
            "-o",
            metavar="DIR",
            shown=False,
        ),
    ],
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    height: HeightOpt = "auto",
    shape: ShapeOpt = "auto",
    level_split: LevelSplitOpt = DEFAULT_LEVEL_SPLIT,
    population: Annotated[
        int | None,
        option(
            "N, the clients of the run over all its cohorts \\[default: those in FILE].",
            metavar="N",
            shown=False,
            min=1,
        ),
    ] = None,
    units: UnitOptions = UNITS,
    neighbours: Annotated[
        int | None,
        option(
            "K, masking neighbours per side \\[default: ⌈log2 n⌉].", metavar="K", shown=False, min=1
        ),
    ] = None,
    dropout: Annotated[
        float,
        option(
            "Share of clients that drop out after masking (simulated).",
            metavar="SHARE",
            min=0.0,
            max=0.99,
        ),
    ] = 0.0,
    min_cohort: MinCohortOpt = 10,
    colluders: Annotated[
        int,
        option(
            "distdp: size every noise share so that the claim holds against a server that "
            "colludes with up to this many clients of a cohort (below --min-cohort); the "
            "release then carries up to min-cohort/(min-cohort − t) times the noise.",
            min=0,
        ),
    ] = 0,
    sign_key: Annotated[
        Path | None,
        option(
            "Sign the manifest with this key (fedeval keygen).",
            "--sign-key",
            metavar="KEY",
            shown=False,
        ),
    ] = None,
    seed: SeedOpt = None,
    table: TableOptions = TABLE,
    thresholds: Annotated[
        str | None,
        option(
            "Thresholds the analyst will ask for: cell edges of the release (the same for "
            "every client) \\[default: 1/11 … 10/11 of the score range, as evaluate].",
            metavar="T,T,…",
            shown=False,
        ),
    ] = None,
) -> None:
    """Every client's report, as deployed: the protocol's step 1.

    Each client makes its report with the per-client encoder (one-hot level counts; a Pólya
    noise share sized to this cohort under distdp, so the cohort's sum is private on its own;
    OUE bits under localdp, exactly L reports per client under --unit client) and, under
    federated and distdp, masks it for secure aggregation (pairwise masks mod 2^32 from keys
    drawn from the OS CSPRNG and expanded with AES-CTR; they cancel in the sum, so no single
    report reveals anything). Cohorts below --min-cohort clients are refused. The directory
    appears only when complete, with a sealed manifest (--sign-key also signs it). Then run
    fedeval aggregate.

    Examples:
    $ fedeval encode clients.parquet -m distdp -o reports/
    $ fedeval aggregate reports/ -o run.fedeval
    $ fedeval evaluate --from run.fedeval

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.protocol.encode import encode_file
    from fedeval.tables.read import source_name

    with errors_to_exit(), progress_bar("encoding client reports", True) as progress:
        if is_stdout(output):
            raise UsageError("encode writes a directory of reports: -o - (stdout) cannot hold it.")
        settings = run_settings(locals())  # the record flower simulate and new run with
        s = encode_file(
            file,
            output,
            **settings.encode_keywords(),
            sign_key=private_key(sign_key),
            columns=table.columns(),
            population=population,
            dropout=dropout,
            colluders=colluders,
            progress=progress,
        )
    cfg = s.config
    eps = "" if cfg.epsilon is None else f" ε={cfg.epsilon:g}"
    err.print(
        f"{source_name(file)}: {s.examples:,} examples of {s.clients:,} clients → '{output}' "
        f"({plural(s.parts, 'part')}, {s.report_bytes:,} bytes)",
        highlight=False,
    )
    t = summary_table()
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
