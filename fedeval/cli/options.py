"""Options several commands share, as `Annotated` types (one help text each)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedeval.core.config import MAX_QUANTILES, PrivacyModel, Relation, Unit

FileArg = Annotated[
    str | None,
    typer.Argument(
        help="Scored, labelled table: Parquet or CSV, or - for CSV on stdin (or use --from).",
        metavar="FILE",
        show_default=False,
    ),
]
TableOutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Output file (.parquet/.pq for Parquet, else CSV) \\[default: CSV on stdout].",
        show_default=False,
    ),
]
"""-o of the commands that write a table (apply, partition)."""

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
        "noise against resolution; under distdp/localdp it is chosen from noisy class totals "
        "released first (5% of ε, or of the reports), part of the release and its claim.",
    ),
]
ShapeOpt = Annotated[
    str,
    typer.Option(
        help="'flat' releases the leaves only (sensitivity 1); 'hierarchy' releases levels "
        "1..h (the papers' dyadic tree, sensitivity h, consistent range queries; 2..h under "
        "localdp from ε = 5 per report); 'auto' picks hierarchy under DP.",
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
        help="Fresh noise draws behind the 95% intervals; 0 switches intervals off (faster). "
        "Memory-bounded: fewer draws are kept above --height 17 (32 at 20).",
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
        help="Ed25519 private key (from fedeval keygen) to sign what this run writes: the -o "
        "document, the saved release and the ledger's new line.",
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
