"""`fedeval calibrate --multiclass`: a multiclass map over federated rounds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fedeval.cli.budget import charge_ledger, check_ledger_options
from fedeval.cli.common import emit, floats, json_output, show, wrote
from fedeval.cli.groups import OptionGroup
from fedeval.cli.helptext import MULTICLASS
from fedeval.cli.options import flag, option
from fedeval.cli.run import printed_text
from fedeval.cli.support import option_given
from fedeval.core.config import Unit
from fedeval.core.errors import UsageError
from fedeval.documents.files import document_text
from fedeval.tables.outputs import Outputs

MulticlassOpt = Annotated[
    bool,
    flag("--multiclass", "Labels 0..c−1 and logit_*/prob_* columns: a multiclass map.", MULTICLASS),
]


def _option(help: str, metavar: str, *decls: str, **limits: Any) -> Any:
    """An option of the Multiclass panel whose default (None, or stated in `help`) is hidden."""
    return option(help, *decls, metavar=metavar, panel=MULTICLASS, shown=False, **limits)


@dataclass(frozen=True)
class MulticlassOptions(OptionGroup):
    """The options of `calibrate --multiclass` alone (binary calibration refuses them)."""

    rounds: Annotated[
        int, option("T calibration rounds.", metavar="T", panel=MULTICLASS, min=1)
    ] = 12
    participation: Annotated[
        float | None,
        _option(
            "Share p of clients per round \\[default: 0.1; 1 for fedtemp under DP].",
            "P",
            min=0.0,
            max=1.0,
        ),
    ] = None
    clients: Annotated[
        int | None,
        _option("K clients when FILE has no client column \\[default: 100].", "K", min=1),
    ] = None
    beta: Annotated[
        float | None,
        _option("Dirichlet(β) label skew over the K clients \\[default: iid].", "β"),
    ] = None
    delta: Annotated[float | None, _option("δ under --epsilon \\[default: 1e-5].", "δ")] = None
    clip: Annotated[
        str | None, _option("Clip C of a client's update (fedtemp) or C+,C- (binning).", "C")
    ] = None
    unweighted: Annotated[
        bool, flag("--unweighted", "Binning without the heterogeneity weighting.", MULTICLASS)
    ] = False
    holdout: Annotated[
        float | None,
        _option("Share of rows held out for fedtemp's check \\[default: 0.2].", "SHARE"),
    ] = None
    server_lr: Annotated[
        float | None,
        _option("fedtemp's server step η on log T \\[default: a schedule].", "η", "--server-lr"),
    ] = None
    fail_if_worse: Annotated[
        bool,
        flag("--fail-if-worse", "Exit 1 when fedtemp's held-out check finds no gain.", MULTICLASS),
    ] = False


MULTICLASS_OPTIONS = MulticlassOptions()


def calibrate_multiclass_command(p: dict[str, Any]) -> None:
    """`calibrate --multiclass` from the command's parameters `p`: the options of binary
    calibration are refused, even at their default value."""
    binary_only = {
        "--model": p["model"] is not None,
        "--height": p["height"] != "auto",
        "--shape": p["shape"] != "auto",
        "--from": p["from_"] is not None,
        "--save-release": p["save_release"] is not None,
        "--per-client": p["per_client"],
        "--unit": p["unit"] is not Unit.EXAMPLE,
        "--relation": p["relation"] is not None,
        "--sign-key": p["sign_key"] is not None,
        "--verify-key": p["verify_key"] is not None,
        "--plot": p["plot"] is not None,
        "--max-examples": p["max_examples"] is not None,
        "--ci-draws": option_given("ci_draws"),
        "--score-col": option_given("score_col"),
        "--score-range": option_given("score_range"),
        "--pos-label": p["pos_label"] is not None,
        "--threads": p["threads"] is not None,
    }
    given = [k for k, v in binary_only.items() if v]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be used with --multiclass.")
    if not p["exact"]:
        # Refused, not ignored: the report is the simulation's and states exact metrics and
        # row counts, which --no-exact promises to leave out.
        raise UsageError(
            "--no-exact cannot be used with --multiclass: its report (table or --format json) "
            "is the simulation's, with exact metrics and row counts. The map written with -o "
            "is the document to share: under --epsilon it holds no exact value."
        )
    if p["file"] is None:
        raise UsageError("--multiclass needs FILE.")
    calibrate_multiclass(
        p["file"],
        method=p["method"] or "fedbbq",
        rounds=p["rounds"],
        participation=p["participation"],
        clients=p["clients"],
        beta=p["beta"],
        client_col=p["client_col"],
        epsilon=p["epsilon"],
        delta=p["delta"],
        clip=p["clip"],
        buckets=p["buckets"],
        ece_bins=p["bins"],
        weighted=not p["unweighted"],
        holdout=p["holdout"],
        server_lr=p["server_lr"],
        fail_if_worse=p["fail_if_worse"],
        label_col=p["label_col"],
        seed=p["seed"],
        output=p["output"],
        output_format=p["output_format"],
        ledger=p["ledger"],
        budget=p["budget"],
    )


def refuse_multiclass_options(p: dict[str, Any]) -> None:
    """Binary calibration refuses the options of --multiclass, even at their default value."""
    multiclass_only = {
        "--rounds": option_given("rounds"),
        "--participation": option_given("participation"),
        "--clients": p["clients"] is not None,
        "--beta": p["beta"] is not None,
        "--delta": p["delta"] is not None,
        "--clip": p["clip"] is not None,
        "--unweighted": p["unweighted"],
        "--holdout": p["holdout"] is not None,
        "--server-lr": p["server_lr"] is not None,
        "--fail-if-worse": p["fail_if_worse"],
    }
    given = [k for k, v in multiclass_only.items() if v]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise UsageError(f"{', '.join(given)} {verb} to --multiclass only.")


def heldout_gate(g: Any) -> dict[str, Any]:
    """--fail-if-worse as a gate in the ``gates`` field: a floor of 0 on the held-out NLL
    gain, judged on its one-sided 95% lower bound (the safeguard's own rule: kept when
    gain − 1.645·sd > 0). It restates the safeguard section, so it adds nothing to the map."""
    from fedeval.api.gates import Gate, GateOn, Kind, Verdict, verdicts_section

    verdict = Verdict(Gate("heldout_nll_gain", 0.0, Kind.FLOOR), float(g.lower), bool(g.kept))
    return verdicts_section([verdict], GateOn.BOUND)


def calibrate_multiclass(
    file: str,
    *,
    clip: str | None,
    buckets: str,
    holdout: float | None,
    fail_if_worse: bool,
    output: Path | None,
    output_format: str,
    ledger: Path | None,
    budget: float | None,
    **options: Any,
) -> None:
    from fedeval.multiclass import (
        calibrate_multiclass_file,
        shareable_map,
    )
    from fedeval.tables.read import source_name
    from fedeval.views.render import Context, Format, render

    check_ledger_options(ledger, budget)
    json_output(output)
    clip_value = None
    if clip is not None:
        values = floats(clip, "--clip")
        if len(values) not in (1, 2):
            raise UsageError(f"--clip takes C or C+,C-. Found {clip!r}.")
        clip_value = values[0] if len(values) == 1 else (values[0], values[1])
    bins = None  # the method's default number of histogram bins (B = 2^M)
    if buckets != "auto":
        try:
            bins = int(buckets)
        except ValueError:
            raise UsageError(f"--buckets takes an integer or 'auto'. Found {buckets!r}.") from None
    if holdout is not None:
        options["holdout"] = holdout
    if fail_if_worse and str(options.get("method", "")).lower() != "fedtemp":
        raise UsageError(
            "--fail-if-worse needs fedtemp's held-out check; binning has none (use --method "
            "fedtemp)."
        )
    if fail_if_worse and holdout == 0:
        raise UsageError("--fail-if-worse needs held-out rows; drop --holdout 0.")
    result = calibrate_multiclass_file(file, clip=clip_value, bins=bins, **options)
    name = source_name(file)
    # The report holds exact metrics; the map is for sharing (under DP: calibrator, privacy).
    doc = render(result, Format.JSON, Context(name))
    if fail_if_worse and result.safeguard is not None:
        doc["gates"] = heldout_gate(result.safeguard)
    map_text = document_text(shareable_map(doc))
    with Outputs() as out:  # the map is written only once the ledger took the charge
        to_stdout = emit(map_text, output, out)
        charge_ledger(ledger, budget, doc)
        out.commit()
    as_json = printed_text(result, output_format, document_text(doc), name)
    table = lambda: render(result, Format.TABLE, Context(name))  # noqa: E731
    show(map_text, to_stdout, output, as_json, table)
    written = shareable_map(doc)  # the summary states what the file holds, no more
    temperature = (written.get("calibrator") or {}).get("temperature")
    wrote(
        output,
        f"{written.get('method')} map written"
        + ("" if temperature is None else f" · T = {temperature:.4g}"),
    )
    if fail_if_worse and result.fell_back:
        from fedeval.core.errors import GateFailed
        from fedeval.multiclass.temperature import Safeguard

        g = result.safeguard
        assert isinstance(g, Safeguard)  # fell_back, and only fedtemp takes --fail-if-worse
        raise GateFailed(
            f"the held-out check found no gain for T = {g.fitted:.4g} (NLL gain {g.gain:+.4f} "
            f"{g.unit}, 95% lower bound {g.lower:+.4f}); the map holds T = 1, the model's own "
            "probabilities."
        )
