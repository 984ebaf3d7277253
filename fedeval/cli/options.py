"""Options several commands share, as `Annotated` types (one help text each), and the factories
every command declares its options with: `option` (a `typer.Option` with its help, metavar and
help panel), `flag` (an on/off switch, no metavar) and `argument` (a required positional).

    seed: Annotated[int | None, option("Seed of the assignment.", shown=False)] = None
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fedeval.cli.helptext import GATES, INPUT, OUTPUT, PRIVACY, PROVENANCE, RELEASE
from fedeval.core.config import MAX_QUANTILES, PrivacyModel, Relation, Unit


def option(
    help: str,
    *decls: str,
    metavar: str | None = None,
    panel: str | None = None,
    shown: bool = True,
    **limits: Any,
) -> Any:
    """`typer.Option(*decls, …)` in help panel `panel`; `shown=False` leaves the default out of
    `--help` (an option whose default is None, or stated in its help); `limits`: typer's other
    keywords (min, max, case_sensitive)."""
    return typer.Option(
        *decls, help=help, metavar=metavar, show_default=shown, rich_help_panel=panel, **limits
    )


def flag(decls: str, help: str, panel: str | None = None) -> Any:
    """An on/off switch (`--name` or `--name/--no-name`): no metavar, so help shows no type."""
    return typer.Option(decls, help=help, metavar="", rich_help_panel=panel)


def argument(help: str, metavar: str) -> Any:
    """A positional argument: `Annotated[str, argument("Scored table …", "FILE")]`."""
    return typer.Argument(help=help, metavar=metavar, show_default=False)


FileArg = Annotated[
    str | None, argument("Scored, labelled table: Parquet or CSV; - reads CSV from stdin.", "FILE")
]
TableOutputOpt = Annotated[
    Path | None,
    option(
        "Write here: .parquet, .csv, .csv.gz/.bz2/.zst \\[default: CSV on stdout].",
        *("--output", "-o"),
        panel=OUTPUT,
        shown=False,
    ),
]
"""-o of the commands that write a table (apply, partition)."""

FromOpt = Annotated[
    Path | None,
    option(
        "Estimate from a saved release instead of FILE (no raw data, no new ε).",
        "--from",
        metavar="RELEASE",
        panel=PROVENANCE,
        shown=False,
    ),
]
SaveReleaseOpt = Annotated[
    Path | None,
    option(
        "Also save the release, to estimate from later with --from.",
        metavar="PATH",
        panel=PROVENANCE,
        shown=False,
    ),
]
ModelOpt = Annotated[
    PrivacyModel,
    option(
        "federated (secure sum, no DP), distdp (distributed ε-DP) or localdp (local ε-DP).",
        *("--model", "-m"),
        metavar="MODEL",
        panel=PRIVACY,
        case_sensitive=False,
    ),
]
EpsilonOpt = Annotated[
    float | None,
    option(
        "ε of the whole release \\[default: 1 for distdp, 5 for localdp].",
        *("--epsilon", "-e"),
        metavar="ε",
        panel=PRIVACY,
        shown=False,
    ),
]
HeightOpt = Annotated[
    str,
    option(
        "h: 2^h cells over the score range; auto: chosen from a noisy coarse histogram; "
        "auto:auc (or ap, precision, …, comma-separated): chosen for those metrics alone.",
        metavar="auto[:METRIC,…]|H",
        panel=RELEASE,
    ),
]
ShapeOpt = Annotated[
    str,
    option(
        "flat (leaves only) or hierarchy (every level, the papers' tree); auto: "
        "hierarchy under DP.",
        metavar="SHAPE",
        panel=RELEASE,
    ),
]
LevelSplitOpt = Annotated[
    str,
    option(
        "distdp: the tree's ε over its levels: auto (more to those up to the thresholds'), "
        "F:S (a share S to the levels up to F) or off (evenly).",
        "--level-split",
        metavar="off|auto|F:S",
        panel=PRIVACY,
    ),
]
SeedOpt = Annotated[
    int | None,
    option("Reproducible simulation: its noise is NOT private.", panel=PRIVACY, shown=False),
]
ScoreColOpt = Annotated[str, option("Column of the scores.", metavar="COL", panel=INPUT)]
LabelColOpt = Annotated[str, option("Column of the labels.", metavar="COL", panel=INPUT)]
ClientColOpt = Annotated[
    str | None,
    option(
        "Column of client ids \\[default: client, if present].",
        metavar="COL",
        panel=INPUT,
        shown=False,
    ),
]
ScoreRangeOpt = Annotated[str, option("The range scores lie in.", metavar="LO,HI", panel=INPUT)]
PosLabelOpt = Annotated[
    str | None,
    option("Label of the positive class \\[default: 0/1 or bool].", metavar="VALUE", panel=INPUT),
]
PerClientOpt = Annotated[
    bool, flag("--per-client", "Make every client's report, as deployed (slower).", RELEASE)
]
ExactOpt = Annotated[
    bool, flag("--exact/--no-exact", "Show exact values beside the estimates.", OUTPUT)
]
QuantilesOpt = Annotated[
    int,
    option(
        "Q quantiles per class of the curves.",
        *("--quantiles", "-q"),
        metavar="Q",
        panel=RELEASE,
        min=2,
        max=MAX_QUANTILES,
    ),
]
CiDrawsOpt = Annotated[
    int,
    option(
        "Noise draws behind the 95% intervals; 0: none.",
        "--ci-draws",
        metavar="N",
        panel=RELEASE,
        min=0,
    ),
]
FailUnderOpt = Annotated[
    list[str] | None,
    option(
        "Exit 1 if METRIC may be below VALUE: auc, ap, ece, recall@0.5, …",
        "--fail-under",
        metavar="METRIC=VALUE",
        panel=GATES,
        shown=False,
    ),
]
FailOverOpt = Annotated[
    list[str] | None,
    option(
        "Exit 1 if METRIC may be above VALUE, e.g. ece=0.03.",
        "--fail-over",
        metavar="METRIC=VALUE",
        panel=GATES,
        shown=False,
    ),
]
GateOnOpt = Annotated[
    str,
    option("Judge on the 95% bound or on the estimate.", metavar="bound|estimate", panel=GATES),
]
LedgerOpt = Annotated[
    Path | None,
    option(
        "Charge the release to this privacy ledger.", metavar="PATH", panel=PRIVACY, shown=False
    ),
]
BudgetOpt = Annotated[
    float | None,
    option("Total ε the ledger may spend.", metavar="ε", panel=PRIVACY, shown=False),
]
UnitOpt = Annotated[
    Unit,
    option(
        "Whom ε protects: one example, or a whole client (needs --max-examples).",
        metavar="example|client",
        panel=PRIVACY,
        case_sensitive=False,
    ),
]
RelationOpt = Annotated[
    Relation | None,
    option(
        "add-remove (size secret) or replace \\[default: add-remove; replace for localdp].",
        "--relation",
        metavar="RELATION",
        panel=PRIVACY,
        shown=False,
        case_sensitive=False,
    ),
]
MinCohortOpt = Annotated[
    int,
    option(
        "Smallest cohort accepted (the server sees each cohort's sum).",
        "--min-cohort",
        panel=PRIVACY,
        min=2,
    ),
]
SignKeyOpt = Annotated[
    Path | None,
    option(
        "Sign what this run writes (the -o document, saved release, ledger line) with "
        "this key (fedeval keygen).",
        "--sign-key",
        metavar="KEY",
        panel=PROVENANCE,
        shown=False,
    ),
]
VerifyKeyOpt = Annotated[
    Path | None,
    option(
        "Refuse a release not signed by this public key.",
        "--verify-key",
        metavar="PUB",
        panel=PROVENANCE,
        shown=False,
    ),
]
MaxExamplesOpt = Annotated[
    int | None,
    option(
        "L, each client's cap under --unit client.",
        "--max-examples",
        metavar="L",
        panel=PRIVACY,
        shown=False,
        min=1,
    ),
]
ThreadsOpt = Annotated[
    int | None,
    option(
        "Threads that read the input \\[default: every core].",
        "--threads",
        metavar="N",
        panel=INPUT,
        shown=False,
        min=1,
    ),
]
