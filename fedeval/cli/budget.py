"""The privacy ledger and the quality gates as the one-shot commands use them: checked before
any work, charged before anything is shown, judged last (exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from fedeval.cli.common import err, floats
from fedeval.errors import UsageError


def gate_options(fail_under: list[str] | None, fail_over: list[str] | None, gate_on: str) -> Any:
    from fedeval.gates import GateOn, Kind, parse_gates

    try:
        on = GateOn(gate_on)
    except ValueError:
        raise UsageError(f"--gate-on takes bound or estimate. Found {gate_on!r}.") from None
    return parse_gates(fail_under, Kind.FLOOR) + parse_gates(fail_over, Kind.CEILING), on


def with_gate_thresholds(
    text: str | None, gates: list[Any], score_range: tuple[float, float]
) -> list[float] | None:
    """The thresholds to evaluate: those asked for (or the default ones) plus every threshold a
    gate names, so `--fail-under recall@0.5=0.7` works without --thresholds."""
    from fedeval.evaluate import DEFAULT_THRESHOLDS
    from fedeval.gates import gate_thresholds

    extra = gate_thresholds(gates)
    if text is None and not extra:
        return None
    lo, hi = score_range
    base = (
        floats(text, "--thresholds")
        if text is not None
        else [lo + (hi - lo) * t for t in DEFAULT_THRESHOLDS]
    )
    return sorted(set(base) | set(extra))


def apply_gates(gates: list[Any], on: Any, doc: dict[str, Any]) -> None:
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


def check_ledger_options(ledger: Path | None, budget: float | None) -> None:
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


def charge_ledger(
    ledger: Path | None, budget: float | None, doc: dict[str, Any], command: str, covered: str
) -> None:
    """Charge the release to the ledger before anything is shown (refused: nothing is).
    A ledger holds no file paths (and no seed)."""
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


def charge_if_new(
    ledger: Path | None,
    budget: float | None,
    doc: dict[str, Any],
    command: str,
    covered: str,
    simulation: bool,
) -> None:
    """A simulated run is a new release and is charged; estimates from a saved aggregate are
    post-processing of a release already charged, and cost no privacy budget."""
    if simulation:
        charge_ledger(ledger, budget, doc, command, covered)
    elif ledger is not None:
        err.print(f"ledger {ledger}: nothing charged (post-processing of a saved release)")
