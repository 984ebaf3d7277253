"""`fedeval check`: quality gates judged on a saved report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fedeval.cli.app import app
from fedeval.cli.budget import apply_gates, gate_options, gates_section, judge_gates
from fedeval.cli.common import OutputFormat, errors_to_exit, public_key
from fedeval.cli.helptext import ESTIMATE, command_help
from fedeval.cli.options import FailOverOpt, FailUnderOpt, GateOnOpt, VerifyKeyOpt, argument, option
from fedeval.core.errors import UsageError

CHECK_SCHEMA = "fedeval.check/1"
"""`check --format json`: the report judged, and the gates' verdicts (`fedeval.api.gates`)."""


@app.command(rich_help_panel=ESTIMATE)
@command_help
def check(
    report: Annotated[
        Path,
        argument(
            "A report (fedeval evaluate -o) or calibration map (fedeval calibrate -o).", "REPORT"
        ),
    ],
    fail_under: FailUnderOpt = None,
    fail_over: FailOverOpt = None,
    gate_on: GateOnOpt = "bound",
    verify_key: VerifyKeyOpt = None,
    output_format: Annotated[
        OutputFormat,
        option(
            "table: verdicts on stderr; json: one document of verdicts on stdout.",
            "--format",
            "-f",
            metavar="table|json",
        ),
    ] = OutputFormat.table,
) -> None:
    """Judge quality gates on a saved report or calibration map.

    A report's seal catches a number edited by hand, but anyone can re-seal an edited report:
    with --verify-key NAME.pub only a report signed by that key (evaluate -o FILE --sign-key
    NAME.key) is judged.

    Examples:
    $ fedeval check report.json --fail-under auc=0.85,recall@0.5=0.7
    $ fedeval check map.json --fail-over ece_calibrated=0.02 -f json

    Exit codes: 0 every gate passed · 1 a gate failed · 2 bad input or usage.
    """
    from fedeval.core.errors import FedevalError, InputError

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
            verdicts = judge_gates(gates, on, doc)
        except FedevalError as e:  # the report lacks what a gate needs
            raise InputError(f"'{report}': {e}", file=str(report)) from None
        if output_format is OutputFormat.json:
            import sys

            from fedeval.core.version import __version__
            from fedeval.documents.files import document_text

            sys.stdout.write(
                document_text(
                    {
                        "schema": CHECK_SCHEMA,
                        "fedeval_version": __version__,
                        "report": str(report),
                        "report_schema": doc["schema"],
                        "gates": gates_section(verdicts, on),
                    }
                )
            )
        apply_gates(verdicts, on)
