"""Options several commands share, as `Annotated` types (one help text each)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedeval.cli.helptext import GATES, INPUT, OUTPUT, PRIVACY, PROVENANCE, RELEASE
from fedeval.core.config import MAX_QUANTILES, PrivacyModel, Relation, Unit

FileArg = Annotated[
    str | None,
    typer.Argument(
        help="Scored, labelled table: Parquet or CSV; - reads CSV from stdin.",
        metavar="FILE",
        show_default=False,
    ),
]
TableOutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write here: .parquet, .csv, .csv.gz/.bz2/.zst \\[default: CSV on stdout].",
        show_default=False,
        rich_help_panel=OUTPUT,
    ),
]
"""-o of the commands that write a table (apply, partition)."""

FromOpt = Annotated[
    Path | None,
    typer.Option(
        "--from",
        help="Estimate from a saved release instead of FILE (no raw data, no new ε).",
        metavar="RELEASE",
        show_default=False,
        rich_help_panel=PROVENANCE,
    ),
]
SaveReleaseOpt = Annotated[
    Path | None,
    typer.Option(
        help="Also save the release, to estimate from later with --from.",
        metavar="PATH",
        show_default=False,
        rich_help_panel=PROVENANCE,
    ),
]
ModelOpt = Annotated[
    PrivacyModel,
    typer.Option(
        "--model",
        "-m",
        help="federated (secure sum, no DP), distdp (distributed ε-DP) or localdp (local ε-DP).",
        metavar="MODEL",
        case_sensitive=False,
        rich_help_panel=PRIVACY,
    ),
]
EpsilonOpt = Annotated[
    float | None,
    typer.Option(
        "--epsilon",
        "-e",
        help="ε of the whole release \\[default: 1 for distdp, 5 for localdp].",
        metavar="ε",
        show_default=False,
        rich_help_panel=PRIVACY,
    ),
]
HeightOpt = Annotated[
    str,
    typer.Option(
        help="h: 2^h cells over the score range; auto: chosen from a noisy coarse histogram; "
        "auto:auc (or ap, precision, …, comma-separated): chosen for those metrics alone.",
        metavar="auto[:METRIC,…]|H",
        rich_help_panel=RELEASE,
    ),
]
ShapeOpt = Annotated[
    str,
    typer.Option(
        help="flat (leaves only) or hierarchy (every level, the papers' tree); auto: "
        "hierarchy under DP.",
        metavar="SHAPE",
        rich_help_panel=RELEASE,
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        help="Reproducible simulation: its noise is NOT private.",
        show_default=False,
        rich_help_panel=PRIVACY,
    ),
]
ScoreColOpt = Annotated[
    str, typer.Option(help="Column of the scores.", metavar="COL", rich_help_panel=INPUT)
]
LabelColOpt = Annotated[
    str, typer.Option(help="Column of the labels.", metavar="COL", rich_help_panel=INPUT)
]
ClientColOpt = Annotated[
    str | None,
    typer.Option(
        help="Column of client ids \\[default: client, if present].",
        metavar="COL",
        show_default=False,
        rich_help_panel=INPUT,
    ),
]
ScoreRangeOpt = Annotated[
    str,
    typer.Option(help="The range scores lie in.", metavar="LO,HI", rich_help_panel=INPUT),
]
PosLabelOpt = Annotated[
    str | None,
    typer.Option(
        help="Label of the positive class \\[default: 0/1 or bool].",
        metavar="VALUE",
        rich_help_panel=INPUT,
    ),
]
PerClientOpt = Annotated[
    bool,
    typer.Option(
        "--per-client",
        help="Make every client's report, as deployed (slower).",
        metavar="",
        rich_help_panel=RELEASE,
    ),
]
ExactOpt = Annotated[
    bool,
    typer.Option(
        "--exact/--no-exact",
        help="Show exact values beside the estimates.",
        metavar="",
        rich_help_panel=OUTPUT,
    ),
]
QuantilesOpt = Annotated[
    int,
    typer.Option(
        "--quantiles",
        "-q",
        min=2,
        max=MAX_QUANTILES,
        help="Q quantiles per class of the curves.",
        metavar="Q",
        rich_help_panel=RELEASE,
    ),
]


CiDrawsOpt = Annotated[
    int,
    typer.Option(
        "--ci-draws",
        min=0,
        help="Noise draws behind the 95% intervals; 0: none.",
        metavar="N",
        rich_help_panel=RELEASE,
    ),
]
FailUnderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-under",
        help="Exit 1 if METRIC may be below VALUE: auc, ap, ece, recall@0.5, …",
        metavar="METRIC=VALUE",
        show_default=False,
        rich_help_panel=GATES,
    ),
]
FailOverOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-over",
        help="Exit 1 if METRIC may be above VALUE, e.g. ece=0.03.",
        metavar="METRIC=VALUE",
        show_default=False,
        rich_help_panel=GATES,
    ),
]
GateOnOpt = Annotated[
    str,
    typer.Option(
        help="Judge on the 95% bound or on the estimate.",
        metavar="bound|estimate",
        rich_help_panel=GATES,
    ),
]
LedgerOpt = Annotated[
    Path | None,
    typer.Option(
        help="Charge the release to this privacy ledger.",
        metavar="PATH",
        show_default=False,
        rich_help_panel=PRIVACY,
    ),
]
BudgetOpt = Annotated[
    float | None,
    typer.Option(
        help="Total ε the ledger may spend.",
        metavar="ε",
        show_default=False,
        rich_help_panel=PRIVACY,
    ),
]
UnitOpt = Annotated[
    Unit,
    typer.Option(
        help="Whom ε protects: one example, or a whole client (needs --max-examples).",
        metavar="example|client",
        case_sensitive=False,
        rich_help_panel=PRIVACY,
    ),
]
RelationOpt = Annotated[
    Relation | None,
    typer.Option(
        "--relation",
        case_sensitive=False,
        help="add-remove (size secret) or replace \\[default: add-remove; replace for localdp].",
        metavar="RELATION",
        show_default=False,
        rich_help_panel=PRIVACY,
    ),
]
MinCohortOpt = Annotated[
    int,
    typer.Option(
        "--min-cohort",
        min=2,
        help="Smallest cohort accepted (the server sees each cohort's sum).",
        rich_help_panel=PRIVACY,
    ),
]
SignKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--sign-key",
        help="Sign what this run writes (the -o document, saved release, ledger line) with "
        "this key (fedeval keygen).",
        metavar="KEY",
        show_default=False,
        rich_help_panel=PROVENANCE,
    ),
]
VerifyKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--verify-key",
        help="Refuse a release not signed by this public key.",
        metavar="PUB",
        show_default=False,
        rich_help_panel=PROVENANCE,
    ),
]
MaxExamplesOpt = Annotated[
    int | None,
    typer.Option(
        "--max-examples",
        min=1,
        help="L, each client's cap under --unit client.",
        metavar="L",
        show_default=False,
        rich_help_panel=PRIVACY,
    ),
]

ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        help="Threads that read the input \\[default: every core].",
        metavar="N",
        show_default=False,
        rich_help_panel=INPUT,
    ),
]
