"""Options several commands share, declared once as groups: a frozen dataclass whose fields are
the options (`Annotated` types of `fedeval.cli.options`, with their defaults), and the decorator
`grouped` that spreads a group's fields into the command's parameters where the group stands
(so `--help` lists them in that place) and hands the command the group, rebuilt.

    @app.command()
    @command_help
    @grouped
    def curves(file: FileArg = None, ..., table: TableOptions = TABLE) -> None: ...

A group may hold a group (`OneShotOptions` holds `UnitOptions`); `flat` turns a command's
parameters back into one name → value mapping (what `fedeval.cli.run.ReleaseOptions` reads).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, get_type_hints

from fedeval.cli.common import floats, parse_score_range
from fedeval.cli.options import (
    BudgetOpt,
    CiDrawsOpt,
    ClientColOpt,
    ExactOpt,
    FromOpt,
    LabelColOpt,
    LedgerOpt,
    LevelSplitOpt,
    MaxExamplesOpt,
    PerClientOpt,
    PosLabelOpt,
    RelationOpt,
    SaveReleaseOpt,
    ScoreColOpt,
    ScoreRangeOpt,
    SignKeyOpt,
    ThreadsOpt,
    UnitOpt,
    VerifyKeyOpt,
)
from fedeval.core.config import DEFAULT_LEVEL_SPLIT, Unit

if TYPE_CHECKING:
    from fedeval.flower.settings import RunSettings
    from fedeval.tables.read import Columns

F = TypeVar("F", bound=Callable[..., Any])


class OptionGroup:
    """Base of the option groups: `grouped` spreads a parameter of a subclass's type."""

    group: ClassVar[bool] = True


@dataclass(frozen=True)
class TableOptions(OptionGroup):
    """How to read the scored table: its columns, score range and positive label."""

    score_col: ScoreColOpt = "score"
    label_col: LabelColOpt = "label"
    client_col: ClientColOpt = None
    score_range: ScoreRangeOpt = "0,1"
    pos_label: PosLabelOpt = None

    def columns(self) -> Columns:
        """The score, label and client columns to read."""
        from fedeval.tables.read import Columns  # lazily: the CLI starts without pyarrow

        return Columns(self.score_col, self.label_col, self.client_col)


@dataclass(frozen=True)
class UnitOptions(OptionGroup):
    """Whom ε protects and over which neighbouring relation."""

    unit: UnitOpt = Unit.EXAMPLE
    max_examples: MaxExamplesOpt = None
    relation: RelationOpt = None

    def keywords(self) -> dict[str, Any]:
        """unit, max_examples and relation as the library's keywords take them."""
        return {"unit": self.unit, "max_examples": self.max_examples, "relation": self.relation}


@dataclass(frozen=True)
class SourceOptions(OptionGroup):
    """The table a one-shot command reads, and how its release is simulated and estimated
    (the tree's split of ε over its levels too: a setting of the simulated release)."""

    table: TableOptions = TableOptions()
    per_client: PerClientOpt = False
    exact: ExactOpt = True
    ci_draws: CiDrawsOpt = 200
    level_split: LevelSplitOpt = DEFAULT_LEVEL_SPLIT


@dataclass(frozen=True)
class OneShotOptions(OptionGroup):
    """What else a one-shot command reads or writes: the ledger, a saved release, keys; whom
    ε protects; the reading threads."""

    ledger: LedgerOpt = None
    budget: BudgetOpt = None
    from_: FromOpt = None
    save_release: SaveReleaseOpt = None
    sign_key: SignKeyOpt = None
    verify_key: VerifyKeyOpt = None
    units: UnitOptions = UnitOptions()
    threads: ThreadsOpt = None


TABLE = TableOptions()
UNITS = UnitOptions()
SOURCE = SourceOptions()
ONE_SHOT = OneShotOptions()


def _is_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, OptionGroup)


def _options(group: type[OptionGroup]) -> Iterator[inspect.Parameter]:
    """The command-line parameters of `group`, nested groups spread in place."""
    hints = get_type_hints(group, include_extras=True)
    for f in fields(group):  # type: ignore[arg-type]  # every group is a dataclass
        if _is_group(hints[f.name]):
            yield from _options(hints[f.name])
        else:
            kind = inspect.Parameter.KEYWORD_ONLY
            yield inspect.Parameter(f.name, kind, default=f.default, annotation=hints[f.name])


def _build(group: type[OptionGroup], values: dict[str, Any]) -> Any:
    """`group` from the parsed values of its options (taken out of `values`)."""
    hints = get_type_hints(group, include_extras=True)
    kwargs = {
        f.name: _build(hints[f.name], values) if _is_group(hints[f.name]) else values.pop(f.name)
        for f in fields(group)  # type: ignore[arg-type]
    }
    return group(**kwargs)


def grouped(func: F) -> F:
    """`func` with each parameter typed as an `OptionGroup` spread into that group's options,
    in place (the order `--help` shows); the command receives the group rebuilt."""
    signature = inspect.signature(func, eval_str=True)
    groups: dict[str, type[OptionGroup]] = {}
    params: list[inspect.Parameter] = []
    for p in signature.parameters.values():
        if _is_group(p.annotation):
            groups[p.name] = p.annotation
            params.extend(_options(p.annotation))
        else:
            params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))

    @functools.wraps(func)
    def command(**values: Any) -> Any:
        for name, group in groups.items():
            values[name] = _build(group, values)
        return func(**values)

    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return command  # type: ignore[return-value]


def flat(params: Mapping[str, Any]) -> dict[str, Any]:
    """A command's parameters (its `locals()`) with every group spread into its options."""
    out: dict[str, Any] = {}
    for name, value in params.items():
        if isinstance(value, OptionGroup) and is_dataclass(value):
            out |= flat({f.name: getattr(value, f.name) for f in fields(value)})
        else:
            out[name] = value
    return out


RUN_SETTINGS = (
    *("model", "epsilon", "height", "shape", "unit", "max_examples", "relation", "pos_label"),
    *("min_cohort", "neighbours", "retries", "seed", "level_split"),
)
"""The options of a protocol run, by the names `RunSettings` gives them."""


def run_settings(params: Mapping[str, Any]) -> RunSettings:
    """The settings of a protocol run (`fedeval.flower.settings.RunSettings`) from a command's
    parameters (its `locals()`), checked once: encode and flower's simulate and new build the
    same record; a setting the command has no option for (encode: --retries) keeps its default."""
    from fedeval.flower.settings import RunSettings

    options = flat(params)
    thresholds = options["thresholds"]
    return RunSettings(
        **{k: options[k] for k in RUN_SETTINGS if k in options},
        score_range=parse_score_range(options["score_range"]),
        thresholds=None if thresholds is None else tuple(floats(thresholds, "--thresholds")),
    )


__all__ = [
    "ONE_SHOT",
    "SOURCE",
    "TABLE",
    "UNITS",
    "OneShotOptions",
    "SourceOptions",
    "TableOptions",
    "UnitOptions",
    "flat",
    "grouped",
    "run_settings",
]
