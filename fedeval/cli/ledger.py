"""`fedeval ledger`: a privacy ledger's budget, composed ε per dataset and releases."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

from rich.console import Console
from rich.table import Table

from fedeval.cli.app import app
from fedeval.cli.common import OutputFormat, errors_to_exit, public_key
from fedeval.cli.helptext import PLAN, command_help
from fedeval.cli.options import VerifyKeyOpt, argument, option


@app.command("ledger", rich_help_panel=PLAN)
@command_help
def ledger_show(
    path: Annotated[Path, argument("A privacy ledger.", "LEDGER")],
    budget: Annotated[
        float | None,
        option(
            "The budget you expect; refused if it differs from the one the ledger stores.",
            shown=False,
        ),
    ] = None,
    output_format: Annotated[
        OutputFormat,
        option("table, or json (budget, per-dataset totals, entries).", "--format", "-f"),
    ] = OutputFormat.table,
    verify_key: VerifyKeyOpt = None,
) -> None:
    """A privacy ledger: its budget, ε spent per dataset, releases.

    Each dataset's composed ε is shown with its unit and neighbouring relation.

    Every line is sealed into a hash chain that starts with the budget: an edited, removed or
    reordered line is refused. With [bold]--verify-key NAME.pub[/bold] every line must be
    signed by that key. The chain's head is printed: kept elsewhere, it shows a later
    truncation.

    Pure ε-DP releases compose by adding up (exact, δ = 0); a dataset with Gaussian releases is
    composed by dp_accounting's RDP accountant at the ledger's δ.

    Examples:
    $ fedeval ledger budget.jsonl
    $ fedeval ledger budget.jsonl -f json

    Exit codes: 0 ok · 2 bad input or usage.
    """
    from fedeval.core.errors import InputError
    from fedeval.privacy.accounting import describe_event
    from fedeval.privacy.ledger import Ledger, check_budget

    with errors_to_exit():
        if not Path(path).exists():
            raise InputError(f"cannot read ledger '{path}': no such file.")
        key = public_key(verify_key)
        check_budget(path, budget, verify_key=key)
        doc = Ledger(path, verify_key=key).summary()
        if output_format is OutputFormat.json:
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
            return
        limit, datasets, entries = doc["budget"], doc["datasets"], doc["entries"]
        out = Console()
        if limit is None:
            out.print(f"ledger {path}: empty (no budget stored yet)", highlight=False)
            return
        out.print(
            f"ledger {path} · budget ε = {limit['epsilon']:g}, δ = {limit['delta']:g} for each "
            f"dataset · created {doc['created']}",
            soft_wrap=True,
            highlight=False,
        )

        def num(x: float | None) -> str:
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
                f"{d['composition']}"
                + (f" · samplers' δ {d['sampler_delta']:.1e} in all" if d["sampler_delta"] else ""),
                soft_wrap=True,
                highlight=False,
            )
        if not datasets:
            out.print("no releases charged yet", highlight=False)
        signed = f"signed by key {doc['signed_by'][:16]}…" if doc["signed_by"] else "unsigned"
        out.print(f"chain head {doc['head']} ({signed})", soft_wrap=True, highlight=False)
