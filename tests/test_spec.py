"""One release spec (`fedeval.core.spec.ReleaseSpec`), checked once where a call enters the
library, and the command line's shared options declared once (`fedeval.cli.groups`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import typer

import fedeval
from fedeval.api.calibrate import calibrate
from fedeval.api.curves import roc_pr_curves
from fedeval.cli import app
from fedeval.core.config import PrivacyModel, Relation, Shape, Unit
from fedeval.core.errors import UsageError
from fedeval.core.params import resolve_config
from fedeval.core.spec import ReleaseSpec, SimulationPath
from fedeval.protocol.encode import encode_file
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import scored_from_arrays


def _data(n: int = 3000, seed: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    return y, np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1)


BAD = [
    {"model": "gaussian"},
    {"model": "federated", "epsilon": 1.0},
    {"model": "distdp", "epsilon": -1.0},
    {"model": "localdp", "epsilon": 1e6},
    {"unit": "client"},
    {"unit": "example", "max_examples": 3},
    {"unit": "household"},
    {"model": "federated", "relation": "replace"},
    {"model": "localdp", "relation": "add-remove"},
    {"relation": "swap"},
    {"height": "tall"},
    {"shape": "ring"},
]


@pytest.mark.parametrize("bad", BAD, ids=lambda b: ",".join(f"{k}={v}" for k, v in b.items()))
def test_spec_refuses_what_resolve_config_refuses_with_its_words(bad):
    """The spec names the parameter as the library always has (`resolve_config`'s message)."""
    kw = dict(bad)
    model = kw.pop("model", "distdp")
    with pytest.raises(UsageError) as old:
        resolve_config(model, n=1000, **kw)
    with pytest.raises(UsageError) as new:
        ReleaseSpec.of(model=model, **kw)
    assert str(new.value) == str(old.value)


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({"ci_draws": 1}, "`ci_draws` must be 0 (no intervals) or at least 2. Found 1."),
        ({"seed": -3}, "`seed` must be a non-negative integer. Found -3."),
        ({"height": 25}, "`height` must be from 1 to 20. Found 25."),
        ({"height": 2.0}, "`height` must be an integer from 1 to 20. Found 2.0."),
    ],
)
def test_run_settings_are_checked_in_the_spec(bad, words):
    with pytest.raises(UsageError) as e:
        ReleaseSpec.of(**bad)
    assert str(e.value) == words


def test_spec_normalises_choices_and_keeps_auto_and_defaults_unresolved():
    spec = ReleaseSpec.of(
        model="localdp", height="6", shape="flat", unit="client", max_examples=2, path="per-client"
    )
    assert spec.model is PrivacyModel.LOCALDP and spec.height == 6 and spec.shape is Shape.FLAT
    assert spec.unit is Unit.CLIENT and spec.path is SimulationPath.PER_CLIENT
    assert spec.epsilon is None and spec.relation is None  # the model's defaults, filled later
    config = spec.config(n=1000)
    assert config.epsilon == 5.0 and config.relation is Relation.REPLACE
    assert ReleaseSpec() == ReleaseSpec.of(model="distdp", height="auto")


def test_spec_and_keywords_make_the_same_release_bit_for_bit():
    y, s = _data()
    kw = dict(model="localdp", epsilon=2.0, height=5, seed=11, ci_draws=20)
    spec = ReleaseSpec.of(**kw)
    for call in (fedeval.evaluate, roc_pr_curves, calibrate):
        a, b = call(y, s, **kw).to_dict(), call(y, s, spec=spec).to_dict()
        a.pop("integrity", None), b.pop("integrity", None)
        assert a == b, call.__name__


def test_spec_and_its_keywords_together_are_refused():
    y, s = _data(200)
    with pytest.raises(UsageError, match=r"give `spec` or the release's keywords.*`epsilon`"):
        fedeval.evaluate(y, s, spec=ReleaseSpec(), epsilon=2.0)


def test_a_bad_setting_is_refused_before_the_table_is_read(tmp_path):
    """The spec is checked where the call enters: no file is opened for a refused ε."""
    with pytest.raises(UsageError, match="`epsilon` must be a positive finite number"):
        fedeval.evaluate_file(tmp_path / "missing.parquet", epsilon=-1.0)


def test_every_entry_point_defaults_to_distdp(tmp_path):
    """One default model: `simulate` and `encode_file` made a federated release unless told
    otherwise, while evaluate, curves, calibrate and the command line made a distdp one."""
    y, s = _data(400)
    assert simulate(scored_from_arrays(y, s), seed=1).config.model is PrivacyModel.DISTDP
    import pandas as pd

    pd.DataFrame({"score": s, "label": y, "client": np.arange(400) % 20}).to_parquet(
        tmp_path / "c.parquet"
    )
    summary = encode_file(tmp_path / "c.parquet", tmp_path / "r", height=3, seed=1)
    assert summary.config.model is PrivacyModel.DISTDP
    assert replace(ReleaseSpec(), epsilon=2.0).model is PrivacyModel.DISTDP


def _options(*path: str) -> list[str]:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]  # a group
    return [p.name for p in command.params if p.name is not None]


def test_shared_options_stand_where_their_group_stands():
    """`grouped` spreads a group's options in place, in order: what --help lists."""
    evaluate = _options("evaluate")
    table = ["score_col", "label_col", "client_col", "score_range", "pos_label"]
    source = [*table, "per_client", "exact", "ci_draws", "level_split"]
    units = ["unit", "max_examples", "relation"]
    one_shot = ["ledger", "budget", "from_", "save_release", "sign_key", "verify_key"]
    one_shot += [*units, "threads"]
    i = evaluate.index("plot")
    gates = ["fail_under", "fail_over", "gate_on"]
    assert evaluate[i + 1 :] == [*source, *gates, *one_shot]
    for name in ("curves", "calibrate"):
        assert _options(name)[-len(source) - len(one_shot) :] == [*source, *one_shot]
    assert _options("encode")[-len(table) - 1 : -1] == table
    simulate_options = _options("flower", "simulate")
    assert simulate_options[-len(table) :] == table
    j = simulate_options.index("shape")
    assert simulate_options[j + 1 : j + 5] == ["level_split", *units]


def test_a_grouped_command_reads_its_shared_options(cli, workdir: Path):
    """--score-col and --unit reach the library through their groups."""
    y, s = _data(600)
    import pandas as pd

    pd.DataFrame({"p": s, "label": y}).to_parquet("t.parquet")
    ok = cli("evaluate", "t.parquet", "--score-col", "p", "-m", "federated", "-f", "json")
    assert ok.exit_code == 0, ok.stderr
    bad = cli("evaluate", "t.parquet", "--score-col", "p", "--unit", "client")
    assert bad.exit_code == 2
    assert "--unit client needs --max-examples L" in bad.stderr


def test_flower_settings_are_checked_as_the_spec_checks_them():
    """A protocol run's settings are refused when made, with the spec's words (they were only
    resolved at `job()` before, after the run had started), and resolve to the same config."""
    from fedeval.flower.settings import RunSettings

    with pytest.raises(UsageError) as e:
        RunSettings(model="federated", epsilon=1.0)
    with pytest.raises(UsageError) as same:
        ReleaseSpec.of(model="federated", epsilon=1.0)
    assert str(e.value) == str(same.value)
    settings = RunSettings(model="localdp", height="6", relation="replace", seed=3)
    assert settings.relation is Relation.REPLACE and settings.release.seed == 3
    spec = ReleaseSpec.of(model="localdp", height=6, relation="replace", seed=3)
    assert settings.job().config == spec.config(n=0, min_height=settings.job().axis.auto_floor(6))
