"""The one path evaluate, curves and calibrate share: check every option before any work, read
the table and simulate the release (or load a saved one), estimate, then stage every output,
charge the ledger and commit them together. A command adds only its library call and how it
shows its result.

    @estimate_command
    def curves(file: FileArg = None, ..., source: SourceOptions = SOURCE, ...) -> None:
        release = ReleaseOptions.of(flat(locals()))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fedeval.cli.app import app
from fedeval.cli.budget import charge_ledger, check_ledger_options
from fedeval.cli.common import (
    emit,
    parse_score_range,
    plot_file,
    private_key,
    progress_bar,
    public_key,
    read_bar,
    show,
    wrote,
)
from fedeval.cli.groups import grouped
from fedeval.cli.helptext import ESTIMATE, command_help
from fedeval.core.config import DEFAULT_LEVEL_SPLIT, MAX_HEIGHT, PrivacyModel, Relation, Unit
from fedeval.core.errors import UsageError
from fedeval.tables.outputs import Outputs, is_stdout

if TYPE_CHECKING:  # the library loads when a command runs, not for --help
    from fedeval.core.spec import ReleaseSpec

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


def estimate_command(func: F) -> F:
    """Registers a one-shot command (evaluate, curves, calibrate) in the Estimate panel, its
    docstring made into rich help and its option groups spread (`grouped`)."""
    return app.command(rich_help_panel=ESTIMATE)(command_help(grouped(func)))


def printed_text(result: Any, fmt: str, json_text: str, source: str) -> str | None:
    """What --format `fmt` prints on stdout: the JSON document `json_text`, None for the table
    (`show` draws it), else the text `fmt`'s renderer makes of `result`."""
    if fmt == "json":
        return json_text
    if fmt == "table":
        return None
    from fedeval.views.render import Context, render

    return str(render(result, fmt, Context(source)))


@dataclass(frozen=True)
class ReleaseOptions:
    """The options of a one-shot command that say where its release comes from (FILE or
    --from), how it is made, and what else it writes (--save-release, --ledger)."""

    file: str | None
    from_: Path | None
    model: PrivacyModel
    epsilon: float | None
    height: str
    shape: str
    seed: int | None
    ci_draws: int
    level_split: str
    score_col: str
    label_col: str
    client_col: str | None
    score_range: str
    pos_label: str | None
    per_client: bool
    exact: bool
    unit: Unit
    max_examples: int | None
    relation: Relation | None
    threads: int | None
    save_release: Path | None
    sign_key: Path | None
    verify_key: Path | None
    ledger: Path | None
    budget: float | None
    output: Path | None
    plot: str | None

    @classmethod
    def of(cls, params: dict[str, Any]) -> ReleaseOptions:
        """The options from a command's parameters (its `locals()`)."""
        return cls(**{f.name: params[f.name] for f in fields(cls)})

    def check(self) -> None:
        """Before any work: the ledger is usable, keys go with what they sign or verify, and
        exactly one of FILE and --from, without settings the saved release already fixes."""
        if self.sign_key is not None and not (
            self.save_release is not None
            or self.ledger is not None
            or (self.output is not None and not is_stdout(self.output))
        ):
            raise UsageError(
                "--sign-key signs what the run writes: the file of -o, the release of "
                "--save-release and the line of --ledger; add one of them."
            )
        check_ledger_options(self.ledger, self.budget, self.signer)
        from fedeval.core.spec import check_ci_draws

        check_ci_draws(self.ci_draws)
        if self.verify_key is not None and self.from_ is None:
            raise UsageError("--verify-key checks the release --from reads; add --from.")
        if is_stdout(self.save_release):
            raise UsageError("--save-release takes a file name (stdout carries the report).")
        if self.height != "auto":
            try:
                h = int(self.height)
            except ValueError:
                h = None  # the library names what it expects
            if h is not None and not 1 <= h <= MAX_HEIGHT:
                raise UsageError(f"--height must be 'auto' or 1..{MAX_HEIGHT}. Found {h}.")
        if (self.file is None) == (self.from_ is None):
            raise UsageError(
                "give FILE (simulate the protocol on a table) or --from AGGREGATE (estimate "
                "from a saved release), exactly one of them."
            )
        simulation_only = {
            "--relation": self.relation is not None,
            "--epsilon": self.epsilon is not None,
            "--height": self.height != "auto",
            "--shape": self.shape != "auto",
            "--per-client": self.per_client,
            "--unit": self.unit is not Unit.EXAMPLE,
            "--max-examples": self.max_examples is not None,
            "--level-split": self.level_split != DEFAULT_LEVEL_SPLIT,
        }
        given = [name for name, value in simulation_only.items() if value]
        if self.from_ is not None and given:
            raise UsageError(
                f"{', '.join(given)} cannot be used with --from: the aggregate fixes the release."
            )

    @cached_property
    def signer(self) -> Any:
        """The Ed25519 private key of --sign-key (None without): it signs the -o document,
        the saved release and the ledger's new line."""
        return private_key(self.sign_key)

    def release_id(self, run: Any) -> str:
        """The charge id of the run's release: the SHA-256 of the saved release's seal (read
        from the file --from names; for a simulated release, the digest its saved file would
        hold)."""
        if self.from_ is not None:
            from fedeval.documents.files import read_json

            doc = read_json(self.from_, noun="aggregate", kind="an aggregate")
            return str(doc["integrity"]["sha256"])
        from fedeval.documents.release_file import release_digest

        return release_digest(run.release, run.axis)

    @property
    def source(self) -> str:
        """The input's name as documents state it."""
        from fedeval.tables.read import source_name

        return str(self.from_) if self.from_ is not None else source_name(self.file or "-")

    @property
    def unit_range(self) -> tuple[float, float]:
        """The score range --score-range states (for FILE)."""
        return parse_score_range(self.score_range)

    def estimate(
        self,
        from_release: Callable[[Any], R],
        from_table: Callable[..., R],
    ) -> R:
        """The command's result: `from_release(run)` on the saved release --from names, or
        `from_table(FILE, spec=, read=, progress=)` with this run's release and reading."""
        if self.from_ is not None:
            from fedeval.documents.release_file import load_release
            from fedeval.protocol.simulate import Simulated

            release, score_range = load_release(self.from_, verify_key=public_key(self.verify_key))
            run = Simulated.from_release(
                release, score_range, seed=self.seed, ci_draws=self.ci_draws
            )
            return from_release(run)
        from fedeval.api.inputs import ReadOptions
        from fedeval.tables.read import Columns

        assert self.file is not None  # check() ran
        spec = self.spec()  # checked before the table is read
        read = ReadOptions(
            columns=Columns(self.score_col, self.label_col, self.client_col),
            pos_label=self.pos_label,
            score_range=self.unit_range,
            exact=self.exact,
            threads=self.threads,
            read_progress=read_bar(self.file),
        )
        with progress_bar("encoding client reports", self.per_client) as progress:
            return from_table(self.file, spec=spec, read=read, progress=progress)

    def spec(self) -> ReleaseSpec:
        """The release FILE's simulation makes, as the library takes it (checked once)."""
        from fedeval.core.spec import ReleaseSpec, SimulationPath

        # one name each; --height carries auto:METRIC's metrics (`height_for`)
        same = [f.name for f in fields(ReleaseSpec) if f.name not in ("path", "height_for")]
        path = SimulationPath.PER_CLIENT if self.per_client else SimulationPath.FAST
        return ReleaseSpec(**{name: getattr(self, name) for name in same}, path=path)

    def show(
        self, text: str, to_stdout: bool, as_text: str | None, table: Callable[[], None]
    ) -> None:
        """After the commit: `text` for -o -, nothing for -o FILE, else `as_text` (--format
        other than table) or the table (`fedeval.cli.common.show`)."""
        show(text, to_stdout, self.output, as_text, table)

    def wrote(self, summary: str) -> None:
        """-o FILE: the line on stderr saying what the file holds (`fedeval.cli.common.wrote`)."""
        wrote(self.output, summary)

    def plot_path(self, default_name: str) -> Path | None:
        """Where --plot draws (`default_name` in a directory), checked before any work."""
        return plot_file(self.plot, default_name)

    def commit(
        self,
        result: Any,
        *,
        doc: dict[str, Any],
        text: str | bytes | None,
        plot: Path | None = None,
    ) -> bool:
        """Stage `text` for -o, the saved release and the figure of `result` for --plot (its
        `fedeval.views.render` figure); charge the ledger with `doc`; then write them all (a
        failure before the charge writes and charges nothing). Returns whether `text` is for
        stdout (-o -)."""
        run = result.run
        with Outputs() as out:
            to_stdout = emit(text, self.output, out)
            if self.save_release is not None:
                from fedeval.documents.release_file import save_release

                save_release(
                    out.staged_path(self.save_release),
                    run.release,
                    run.axis,
                    sign_key=self.signer,
                )
            if plot is not None:
                from fedeval.views.plots import save_figure
                from fedeval.views.render import Format, render

                save_figure(render(result, Format.FIGURE), out.staged_path(plot))
            if self.ledger is not None:
                charge_ledger(
                    self.ledger,
                    self.budget,
                    doc,
                    release=self.release_id(run),
                    sign_key=self.signer,
                )
            out.commit()
        return to_stdout
