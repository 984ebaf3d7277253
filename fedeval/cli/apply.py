"""`fedeval apply`: calibrated probabilities for new scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedeval.cli.app import app
from fedeval.cli.common import errors_to_exit, public_key
from fedeval.cli.options import TableOutputOpt, VerifyKeyOpt
from fedeval.cli.support import option_given


@app.command()
def apply(
    map_file: Annotated[
        Path,
        typer.Argument(
            help="A calibration map made by fedeval calibrate.", metavar="MAP", show_default=False
        ),
    ],
    input_file: Annotated[
        str,
        typer.Argument(
            help="Scores to calibrate: Parquet or CSV, or - for CSV on stdin.",
            metavar="INPUT",
            show_default=False,
        ),
    ],
    output: TableOutputOpt = None,
    score_col: Annotated[
        str,
        typer.Option(
            help="Column holding the scores \\[default: the one the map was fitted on, as the "
            "map records it, else 'score'].",
            show_default=False,
        ),
    ] = "score",
    output_col: Annotated[str, typer.Option(help="Name of the new column.")] = "calibrated",
    verify_key: VerifyKeyOpt = None,
) -> None:
    """Add a column of calibrated probabilities to every row of INPUT (all columns kept).

    With [bold]--verify-key NAME.pub[/bold] only a map signed by that key (calibrate -o FILE
    --sign-key NAME.key) is applied: its seal alone catches edits, not a re-sealed map.

    Example: [bold]cat scores.csv | fedeval apply map.json - > calibrated.csv[/bold]

    Exit codes: 0 ok · 2 bad input or usage (a file output is never left half-written).
    """
    from fedeval.api.calibrate import apply_map_file
    from fedeval.multiclass import apply_multiclass_map_file, map_kind

    with errors_to_exit():
        if verify_key is not None:
            from fedeval.documents.files import read_json
            from fedeval.documents.seals import verify

            doc = read_json(map_file, noun="calibration map", kind="a calibration map")
            if not isinstance(doc, dict):
                from fedeval.core.errors import InputError

                raise InputError(f"'{map_file}' is not a calibration map.")
            verify(doc, str(map_file), verify_key=public_key(verify_key), required=True)
        if map_kind(map_file) == "multiclass":
            apply_multiclass_map_file(map_file, input_file, output)
        else:
            if not option_given("score_col"):  # the column the map was fitted on
                from fedeval.documents.map_file import load_map

                stored = load_map(map_file).document.get("score_column")
                score_col = stored if isinstance(stored, str) and stored else score_col
            apply_map_file(map_file, input_file, output, score_col=score_col, output_col=output_col)
