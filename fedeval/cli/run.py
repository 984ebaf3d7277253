"""The shared path of a one-shot run: check the source and key options, read or load the
release, stage the outputs, charge the ledger and judge the gates."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from fedeval.cli.common import ReadBar, err, floats, parse_score_range
from fedeval.config import Unit
from fedeval.errors import UsageError
from fedeval.outputs import Outputs, is_stdout


def gate_options(fail_under, fail_over, gate_on: str):
    from fedeval.gates import GateOn, Kind, parse_gates

    try:
        on = GateOn(gate_on)
    except ValueError:
        raise UsageError(f"--gate-on takes bound or estimate. Found {gate_on!r}.") from None
    return parse_gates(fail_under, Kind.FLOOR) + parse_gates(fail_over, Kind.CEILING), on


def source_or_aggregate(
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


def loaded_run(from_: Path, seed: int | None, ci_draws: int, verify_key: Path | None = None):
    from fedeval.releasefile import load_release
    from fedeval.simulate import Simulated

    release, score_range = load_release(from_, verify_key=public_key(verify_key))
    return Simulated.from_release(release, score_range, seed=seed, ci_draws=ci_draws)


def private_key(path: Path | None):
    """The Ed25519 signing key at `path` (None: no signature)."""
    if path is None:
        return None
    from fedeval.integrity import load_private_key

    return load_private_key(path)


def public_key(path: Path | None):
    """The Ed25519 verify key at `path` (None: the digest alone is checked)."""
    if path is None:
        return None
    from fedeval.integrity import load_public_key

    return load_public_key(path)


def keys_apply(
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


def stage_release(out: Outputs, path: Path | None, run, sign_key: Path | None = None) -> None:
    """Stage the release --save-release asks for (written when the run commits)."""
    if is_stdout(path):
        raise UsageError("--save-release takes a file name (stdout carries the report).")
    if path is not None:
        from fedeval.releasefile import save_release

        save_release(out.staged_path(path), run.release, run.axis, sign_key=private_key(sign_key))


def charge_if_new(ledger, budget, doc, command, covered, source, run) -> None:
    """A simulated run is a new release and is charged; estimates from a saved aggregate are
    post-processing of a release already charged, and cost no privacy budget. (`source` is not
    recorded in the ledger.)"""
    if run.simulation:
        charge_ledger(ledger, budget, doc, command, covered, source)
    elif ledger is not None:
        err.print(f"ledger {ledger}: nothing charged (post-processing of a saved release)")


def with_gate_thresholds(text: str | None, gates, score_range) -> list[float] | None:
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


def apply_gates(gates, on, doc: dict) -> None:
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


def table_options(
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
        "score_range": parse_score_range(score_range),
        "exact": exact,
        "path": "per-client" if per_client else "fast",
        "progress": progress,
        "threads": threads,
        "read_progress": ReadBar() if err.is_terminal and not err.quiet else None,
    }
