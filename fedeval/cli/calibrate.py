"""`fedeval calibrate`: a calibration map from one private release (binary scores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from fedeval.cli.common import (
    check_buckets,
    errors_to_exit,
    estimate_words,
    json_output,
)
from fedeval.cli.groups import ONE_SHOT, SOURCE, OneShotOptions, SourceOptions, flat
from fedeval.cli.helptext import PRIVACY, RELEASE
from fedeval.cli.multiclass import (
    MULTICLASS_OPTIONS,
    MulticlassOpt,
    MulticlassOptions,
    calibrate_multiclass_command,
    refuse_multiclass_options,
)
from fedeval.cli.options import (
    FileArg,
    HeightOpt,
    SeedOpt,
    ShapeOpt,
    option,
)
from fedeval.cli.output_options import format_option, output_option, plot_option
from fedeval.cli.run import ReleaseOptions, estimate_command, printed_text
from fedeval.core.config import PrivacyModel
from fedeval.documents.files import document_text


@estimate_command
def calibrate(
    file: FileArg = None,
    model: Annotated[
        PrivacyModel | None,
        option(
            "federated, distdp or localdp \\[default: distdp; not with --multiclass].",
            "--model",
            "-m",
            metavar="MODEL",
            panel=PRIVACY,
            shown=False,
            case_sensitive=False,
        ),
    ] = None,
    epsilon: Annotated[
        float | None,
        option(
            "ε of the release \\[default: 1 for distdp, 5 for localdp; --multiclass: no DP].",
            "--epsilon",
            "-e",
            metavar="ε",
            panel=PRIVACY,
            shown=False,
        ),
    ] = None,
    method: Annotated[
        str | None,
        option(
            "binning or bbq; --multiclass: fedbin, fedbbq or fedtemp \\[default: binning; fedbbq].",
            metavar="METHOD",
            panel=RELEASE,
            shown=False,
        ),
    ] = None,
    multiclass: MulticlassOpt = False,
    multiclass_options: MulticlassOptions = MULTICLASS_OPTIONS,
    buckets: Annotated[
        str,
        option(
            "B buckets of the map; auto balances sampling and privacy noise.",
            metavar="auto|B",
            panel=RELEASE,
        ),
    ] = "auto",
    bins: Annotated[
        int,
        option("M equal-width bins of the ECE.", "--bins", metavar="M", panel=RELEASE, min=1),
    ] = 15,
    height: HeightOpt = "auto",
    shape: ShapeOpt = "auto",
    seed: SeedOpt = None,
    output: Annotated[
        Path | None, output_option("Write the map here (.json, shareable; - for stdout).")
    ] = None,
    output_format: Annotated[
        str, format_option("table, or json (the map document).", "CalibrationResult", "table|json")
    ] = "table",
    plot: Annotated[str | None, plot_option("a reliability diagram")] = None,
    source: SourceOptions = SOURCE,
    one_shot: OneShotOptions = ONE_SHOT,
) -> None:
    """A calibration map from one private release; ECE before/after.

    The map is monotone, in [0, 1], and states the privacy claim it was made under; apply it to
    new scores with fedeval apply. With --multiclass, FILE holds integer labels and logit_* or
    prob_* columns, calibrated over T federated rounds.

    Examples:
    $ fedeval calibrate scores.parquet -m distdp -o map.json
    $ fedeval calibrate scores.parquet -o - | fedeval apply - new.csv
    $ fedeval calibrate probs.parquet --multiclass --method fedtemp -e 1

    Exit codes: 0 ok · 1 --fail-if-worse found no gain · 2 bad input or usage (nothing is
    written).
    """
    if multiclass:
        with errors_to_exit():
            calibrate_multiclass_command(flat(locals()))
        return
    model = PrivacyModel.DISTDP if model is None else model
    method = method or "binning"
    from fedeval.api.calibrate import calibrate_file, calibrate_run
    from fedeval.views.dicts import shareable
    from fedeval.views.render import Context, Format, render

    with errors_to_exit():
        release = ReleaseOptions.of(flat(locals()))
        refuse_multiclass_options(flat(locals()))
        check_buckets(buckets)
        json_output(output)
        plot_path = release.plot_path("reliability.png")
        release.check()
        cal = release.estimate(
            lambda run: calibrate_run(run, method=method, buckets=buckets, n_bins=bins),
            lambda file, **options: calibrate_file(
                file, method=method, buckets=buckets, n_bins=bins, **options
            ),
        )
        name = release.source
        doc = render(cal, Format.JSON, Context(name, score_col=source.table.score_col))
        # The map file is made to be shared: under DP it holds no exact value.
        map_text = document_text(shareable(doc), sign_key=release.signer)
        to_stdout = release.commit(cal, doc=doc, text=map_text, plot=plot_path)
        as_text = printed_text(cal, output_format, document_text(doc), name)
        release.show(map_text, to_stdout, as_text, lambda: render(cal, Format.TABLE, Context(name)))
        written = json.loads(map_text)  # the summary states what the file holds, no more
        ece = written["ece"]
        release.wrote(
            f"{written['method']} map written · ECE {estimate_words(ece['raw'])} before, "
            f"{estimate_words(ece['calibrated'])} after (in-sample, {ece['bins']} bins)",
        )
