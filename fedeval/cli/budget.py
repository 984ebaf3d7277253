"""The privacy ledger and the quality gates as the one-shot commands use them: checked before
any work, charged before anything is shown, judged last (exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from fedeval.cli.common import err, floats
from fedeval.core.errors import UsageError


def gate_options(fail_under: list[str] | None, fail_over: list[str] | None, gate_on: str) -> Any:
    """The gates of --fail-under/--fail-over and what --gate-on judges them on."""
    from fedeval.api.gates import gates_from

    return gates_from(fail_under, fail_over, gate_on)


def with_gate_thresholds(
    text: str | None, gates: list[Any], score_range: tuple[float, float]
) -> list[float] | None:
    """--thresholds (or the default ones) plus every threshold a gate names."""
    from fedeval.api.gates import with_gate_thresholds as joined

    return joined(None if text is None else floats(text, "--thresholds"), gates, score_range)


def judge_gates(gates: list[Any], on: Any, report: Any) -> list[Any]:
    """Each gate's verdict on the report (a result, or a saved document), before anything is
    written or charged: a gate that cannot be judged (no interval, no such metric) is a usage
    error of a run that leaves nothing behind."""
    if not gates:
        return []
    from fedeval.api.gates import judge_report

    return judge_report(gates, report, on)


def gates_section(verdicts: list[Any], on: Any) -> dict[str, Any]:
    """The report's ``gates`` field (`fedeval.api.gates.verdicts_section`)."""
    from fedeval.api.gates import verdicts_section

    return verdicts_section(verdicts, on)


def apply_gates(verdicts: list[Any], on: Any) -> None:
    """Print each verdict on stderr; exit 1 if any gate failed."""
    if not verdicts:
        return
    from fedeval.api.gates import enforce

    for v in verdicts:
        style = "green" if v.passed else "bold red"
        err.print(Text(f"gate {v.describe(on)}", style=style))
    enforce(verdicts)


def check_ledger_options(ledger: Path | None, budget: float | None, sign_key: Any = None) -> None:
    """Before any work: --budget needs --ledger; the ledger must be able to take the entry
    (`fedeval.privacy.ledger.Ledger.check`: readable, its chain intact, signed by `sign_key`
    if it is signed)."""
    if ledger is None:
        if budget is not None:
            raise UsageError("--budget is the total ε of a privacy ledger: add --ledger FILE.")
        return
    from fedeval.privacy.ledger import Ledger

    Ledger(ledger, budget, sign_key=sign_key).check()


def charge_ledger(
    ledger: Path | None,
    budget: float | None,
    doc: dict[str, Any],
    *,
    release: str | None = None,
    sign_key: Any = None,
) -> None:
    """Charge the release `doc` describes before anything is shown (refused: nothing is), as
    `fedeval.privacy.ledger.Ledger.charge` does: a release is charged once, under its charge id
    `release`, whether it was made by this run or read with --from and never charged yet."""
    if ledger is None:
        return
    from fedeval.privacy.ledger import Ledger

    book = Ledger(ledger, budget, sign_key=sign_key)
    total = book.charge(doc, release=release)
    if total is None:
        err.print(
            f"ledger {ledger}: nothing charged (this release was already charged to it; "
            "estimates from it are post-processing)",
            highlight=False,
        )
        return
    limit = book.limit()
    assert limit is not None  # the first charge stored it
    at = f" (budget at δ = {limit['delta']:g})" if limit["delta"] else ""
    err.print(
        f"ledger {ledger}: dataset '{book.dataset}' ε spent {total:g} of {limit['epsilon']:g}{at}",
        highlight=False,
    )
