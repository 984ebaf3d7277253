"""`fedeval check`: quality gates judged on a saved report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedeval.cli.app import app
from fedeval.cli.budget import apply_gates, gate_options, judge_gates
from fedeval.cli.common import errors_to_exit, public_key
from fedeval.cli.options import FailOverOpt, FailUnderOpt, GateOnOpt, VerifyKeyOpt
from fedeval.core.errors import UsageError


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
    verify_key: VerifyKeyOpt = None,
) -> None:
    """Judge quality gates on a saved report: exit 1 if a floor or ceiling is broken.

    A report's seal catches a number edited by hand, but anyone can re-seal an edited report:
    with [bold]--verify-key NAME.pub[/bold] only a report signed by that key (evaluate -o FILE
    --sign-key NAME.key) is judged.

    Example: [bold]fedeval check report.json --fail-under auc=0.85,recall@0.5=0.7[/bold]

    Exit codes: 0 every gate passed · 1 a gate failed · 2 bad input or usage.
    """
    from fedeval.core.errors import FedevalError, GateFailed, InputError

    with errors_to_exit():
        gates, on = gate_options(fail_under, fail_over, gate_on)
        if not gates:
            raise UsageError("name at least one gate with --fail-under or --fail-over.")
        from fedeval.documents.files import read_json

        doc = read_json(report, noun="report", kind="a fedeval report")
        if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("fedeval."):
            raise InputError(f"'{report}' is not a fedeval report (no fedeval schema).")
        from fedeval.documents.seals import verify

        # Gates judge numbers someone could have edited: a sealed report must still match its
        # seal, and reports of this version are always sealed.
        verify(
            doc,
            str(report),
            verify_key=public_key(verify_key),
            required=doc["schema"] == "fedeval.report/2",
        )
        try:
            apply_gates(judge_gates(gates, on, doc), on)
        except GateFailed:
            raise
        except FedevalError as e:  # the report lacks what a gate needs
            raise InputError(f"'{report}': {e}", file=str(report)) from None
