"""`fedeval apply`: calibrated probabilities for new scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedeval.cli.app import app
from fedeval.cli.common import errors_to_exit
from fedeval.cli.options import TableOutputOpt
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
) -> None:
    """Add a column of calibrated probabilities to every row of INPUT (all columns kept).

    Example: [bold]cat scores.csv | fedeval apply map.json - > calibrated.csv[/bold]

    Exit codes: 0 ok · 2 bad input or usage (a file output is never left half-written).
    """
    from fedeval.api.calibrate import apply_map_file
    from fedeval.multiclass import apply_multiclass_map_file, map_kind

    with errors_to_exit():
        if map_kind(map_file) == "multiclass":
            apply_multiclass_map_file(map_file, input_file, output)
        else:
            if not option_given("score_col"):  # the column the map was fitted on
                from fedeval.documents.map_file import load_map

                stored = load_map(map_file).document.get("score_column")
                score_col = stored if isinstance(stored, str) and stored else score_col
            apply_map_file(map_file, input_file, output, score_col=score_col, output_col=output_col)
