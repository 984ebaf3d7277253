"""How the input is read is one frozen record (`fedeval.api.inputs.ReadOptions`), as a release
is one `ReleaseSpec`: every entry point takes it as `read`, or its fields as keywords (as they
always have), never both."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fedeval
from fedeval import ReadOptions, ReleaseSpec
from fedeval.core.errors import UsageError
from fedeval.tables.read import Columns

FILE_CALLS = (fedeval.evaluate_file, fedeval.roc_pr_curves_file, fedeval.calibrate_file)
ARRAY_CALLS = (fedeval.evaluate, fedeval.roc_pr_curves, fedeval.calibrate)


def _frame(n: int = 2000, seed: int = 5) -> pd.DataFrame:
    """Scores on [0, 10] with labels 'yes'/'no', under other column names than the defaults."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(3.5 + 3.0 * y, 2.0), 0, 10)
    return pd.DataFrame({"p": s, "truth": np.where(y == 1, "yes", "no"), "site": np.arange(n) % 9})


def _doc(result: object) -> dict:
    doc = result.to_dict()  # type: ignore[attr-defined]
    doc.pop("integrity", None)
    doc.pop("input", None)
    return doc


READ = {
    "columns": Columns(score="p", label="truth", client="site"),
    "pos_label": "yes",
    "score_range": (0.0, 10.0),
    "exact": False,
    "threads": 1,
}
RELEASE = {"model": "localdp", "epsilon": 3.0, "height": 4, "seed": 2, "ci_draws": 0}


@pytest.mark.parametrize("call", FILE_CALLS, ids=lambda c: c.__name__)
def test_a_file_read_by_keywords_or_by_the_options_gives_the_same_result(call, tmp_path: Path):
    path = tmp_path / "t.parquet"
    _frame().to_parquet(path)
    rows: list[int | None] = []
    by_keywords = call(path, **READ, **RELEASE)
    by_options = call(
        path,
        read=ReadOptions(**READ, read_progress=rows.append),
        spec=ReleaseSpec.of(**RELEASE),
    )
    assert _doc(by_options) == _doc(by_keywords)
    assert sum(r for r in rows if r is not None) == 2000  # read_progress travels in the options
    assert by_keywords.run.truth is None  # exact=False reached the reader


@pytest.mark.parametrize("call", ARRAY_CALLS, ids=lambda c: c.__name__)
def test_arrays_read_by_keywords_or_by_the_options_give_the_same_result(call):
    frame = _frame()
    y, s = frame["truth"].to_numpy(), frame["p"].to_numpy()
    read = {"pos_label": "yes", "score_range": (0.0, 10.0)}
    by_keywords = call(y, s, **read, **RELEASE)
    by_options = call(y, s, read=ReadOptions(**read), **RELEASE)
    assert _doc(by_options) == _doc(by_keywords)
    assert by_keywords.run.score_range == (0.0, 10.0)


@pytest.mark.parametrize("call", FILE_CALLS + ARRAY_CALLS, ids=lambda c: c.__name__)
def test_the_options_and_a_reading_keyword_together_are_refused(call, tmp_path: Path):
    """No keyword is silently ignored: `read` and `pos_label` both given is a usage error,
    raised before any input is read."""
    inputs = (tmp_path / "missing.parquet",) if call in FILE_CALLS else ([0, 1], [0.2, 0.7])
    with pytest.raises(UsageError, match=r"give `read` or the reading keywords.*`pos_label`"):
        call(*inputs, read=ReadOptions(), pos_label=1)


@pytest.mark.parametrize("call", FILE_CALLS + ARRAY_CALLS, ids=lambda c: c.__name__)
def test_an_unknown_keyword_is_a_type_error(call, tmp_path: Path):
    inputs = (tmp_path / "missing.parquet",) if call in FILE_CALLS else ([0, 1], [0.2, 0.7])
    with pytest.raises(TypeError, match="score_col"):
        call(*inputs, score_col="p")


@pytest.mark.parametrize("call", ARRAY_CALLS, ids=lambda c: c.__name__)
def test_arrays_refuse_what_only_a_file_reading_uses(call):
    """`columns`, `threads` and `read_progress` read files: on arrays they are not accepted
    as keywords (as before) nor silently dropped from the options."""
    with pytest.raises(TypeError, match="threads"):
        call([0, 1], [0.2, 0.7], threads=2)
    with pytest.raises(UsageError, match="read files, not arrays"):
        call([0, 1], [0.2, 0.7], read=ReadOptions(columns=Columns(score="p")))


def test_the_options_are_frozen():
    read = ReadOptions()
    with pytest.raises(AttributeError):
        read.exact = False  # type: ignore[misc]
