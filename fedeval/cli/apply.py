"""`fedeval apply`: calibrated probabilities for new scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fedeval.cli.app import app
from fedeval.cli.common import errors_to_exit, public_key
from fedeval.cli.helptext import ESTIMATE, command_help
from fedeval.cli.options import TableOutputOpt, VerifyKeyOpt, argument, option
from fedeval.cli.support import option_given
from fedeval.core.errors import InputError, UsageError


@app.command(rich_help_panel=ESTIMATE)
@command_help
def apply(
    map_file: Annotated[
        Path,
        argument("A calibration map made by fedeval calibrate (- for stdin).", "MAP"),
    ],
    input_file: Annotated[
        str,
        argument("Scores to calibrate: Parquet or CSV, or - for CSV on stdin.", "INPUT"),
    ],
    output: TableOutputOpt = None,
    score_col: Annotated[
        str,
        option(
            "Column holding the scores \\[default: the one the map was fitted on, as the "
            "map records it, else 'score'].",
            shown=False,
        ),
    ] = "score",
    output_col: Annotated[str, option("Name of the new column.")] = "calibrated",
    verify_key: VerifyKeyOpt = None,
) -> None:
    """Add calibrated probabilities to every row of a table.

    MAP may be - (stdin) or a pipe when INPUT is a file; -o's name picks the format. With
    --verify-key NAME.pub only a map signed by that key (calibrate -o FILE --sign-key NAME.key)
    is applied: its seal alone catches edits, not a re-sealed map.

    Examples:
    $ fedeval apply map.json new.parquet -o calibrated.parquet
    $ cat new.csv | fedeval apply map.json - > calibrated.csv
    $ fedeval calibrate scores.parquet -o - | fedeval apply - new.csv

    Exit codes: 0 ok · 2 bad input or usage (a file output is never left half-written).
    """
    from fedeval.api.calibrate import apply_map_file
    from fedeval.documents.files import read_json
    from fedeval.documents.map_file import load_map
    from fedeval.documents.seals import verify
    from fedeval.multiclass import apply_multiclass_map_file, map_kind
    from fedeval.multiclass.maps import load_multiclass_map
    from fedeval.tables.write import table_output

    with errors_to_exit():
        table_output(output)  # a name asking for another format: refused before any work
        if str(map_file) == "-" and input_file == "-":
            raise UsageError(
                "MAP and INPUT cannot both be - (stdin): pipe one of them, name the other."
            )
        # Read once (a pipe cannot be read again), to its end, then checked as a file is.
        value = read_json(map_file, noun="map", kind="a calibration map", streams=True)
        if verify_key is not None:
            if not isinstance(value, dict):
                raise InputError(f"'{map_file}' is not a calibration map.")
            verify(value, str(map_file), verify_key=public_key(verify_key), required=True)
        if map_kind(map_file, value=value) == "multiclass":
            mmap = load_multiclass_map(map_file, value=value)
            apply_multiclass_map_file(mmap, input_file, output)
        else:
            cmap = load_map(map_file, value=value)
            if not option_given("score_col"):  # the column the map was fitted on
                stored = cmap.document.get("score_column")
                score_col = stored if isinstance(stored, str) and stored else score_col
            apply_map_file(cmap, input_file, output, score_col=score_col, output_col=output_col)
