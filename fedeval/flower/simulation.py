"""Flower's simulation engine over a scored table: one simulated SuperNode per client.

The table's rows are split into one file per client (by the client column, as everywhere in
fedeval, or into K contiguous parts), each simulated node's ClientApp reads its own file, and
the ServerApp runs the protocol over them (`fedeval.flower.server`). The files hold the
validated scores (at the source's float width, so every leaf is the one-shot's) and 0/1 labels.
"""

from __future__ import annotations

import gc
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fedeval.core.errors import UsageError
from fedeval.flower.client_app import make_client_app
from fedeval.flower.inprocess import InProcessFederation
from fedeval.flower.server import Outcome, ServerProtocol
from fedeval.flower.server_app import make_server_app
from fedeval.flower.settings import RunSettings
from fedeval.tables.read import DEFAULT_COLUMNS, Columns, read_batches, source_name

ENGINE_RAY = "ray"
ENGINE_INPROCESS = "in-process"
ENGINES = (ENGINE_RAY, ENGINE_INPROCESS)


@dataclass(frozen=True)
class Split:
    """A table split into one file per client: ``{directory}/{i}.parquet`` for i < clients."""

    directory: Path
    clients: int
    rows: int

    def path(self, i: int) -> Path:
        return self.directory / f"{i}.parquet"


def split_table(
    source: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    *,
    columns: Columns = DEFAULT_COLUMNS,
    clients: int | None = None,
    score_range: tuple[float, float] = (0.0, 1.0),
    pos_label: object = None,
) -> Split:
    """Write each client's rows (validated: scores in range, binary labels) to its own file.

    With a client column (named, or a column named ``client``) each client id is one client,
    in sorted order of the ids; `clients`, if given, must be their number. Without one, the rows
    go to `clients` contiguous parts (every part at least one row)."""
    scores, positive, ids = [], [], []
    for b in read_batches(source, columns, score_range=score_range, pos_label=pos_label):
        scores.append(b.scores)
        positive.append(b.positive)
        if b.clients is not None:
            ids.append(b.clients)
    s = np.concatenate(scores)
    y = np.concatenate(positive).astype(np.int8)
    n = len(s)
    if ids:
        column = pa.chunked_array(ids)
        if column.null_count:
            raise UsageError(f"'{source_name(source)}': the client column has missing ids.")
        _, codes = np.unique(column.to_numpy(zero_copy_only=False), return_inverse=True)
        codes = codes.astype(np.int64).ravel()
        k = int(codes.max()) + 1
        if clients is not None and clients != k:
            raise UsageError(
                f"'{source_name(source)}' holds {k:,} clients in its client column; --clients "
                f"{clients} does not match (leave it out to use the column)."
            )
    else:
        if clients is None:
            raise UsageError(
                f"'{source_name(source)}' has no client column: give --clients K to split its "
                "rows into K clients (or --client-col)."
            )
        if not 1 <= clients <= n:
            raise UsageError(f"--clients must be between 1 and the {n:,} rows. Found {clients}.")
        k = clients
        codes = (np.arange(n, dtype=np.int64) * k) // n
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(k + 1))
    out = Path(directory)
    for i in range(k):
        rows = order[bounds[i] : bounds[i + 1]]
        pq.write_table(pa.table({"score": s[rows], "label": y[rows]}), out / f"{i}.parquet")
    return Split(out, k, n)


def run_in_process(
    settings: RunSettings,
    split: Split,
    *,
    drop: dict[int, str] | None = None,
) -> Outcome:
    """The protocol with the real ClientApp and Flower messages, called in this process (no
    engine): for tests and for measuring the protocol apart from the engine."""
    fed = InProcessFederation(
        split.directory, split.clients, drop=drop, allow_unmasked=not settings.masks
    )
    protocol = ServerProtocol(
        settings.job(),
        fed.send,
        min_cohort=settings.min_cohort,
        neighbours=settings.neighbours,
        retries=settings.retries,
    )
    return protocol.run(fed.node_ids)


def run_flower(
    settings: RunSettings | Sequence[RunSettings],
    split: Split,
    *,
    drop: dict[int, str] | None = None,
    backend_config: dict[str, Any] | None = None,
    verbose: bool = False,
) -> list[Outcome]:
    """The protocol on Flower's simulation engine (Ray): `split.clients` simulated SuperNodes,
    each running the ClientApp on its own file, and the ServerApp in this process; one
    outcome per settings (several settings: independent runs one after another, sharing the
    engine's start-up)."""
    from flwr.simulation import run_simulation

    result: list[Outcome] = []
    server = make_server_app(settings, on_outcome=result.append, min_nodes=split.clients)
    runs = [settings] if isinstance(settings, RunSettings) else list(settings)
    unmasked = any(not s.masks for s in runs)
    client = make_client_app(data_dir=str(split.directory), drop=drop, allow_unmasked=unmasked)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    if not verbose:
        flwr_log = logging.getLogger("flwr")
        flwr_log.setLevel(logging.WARNING)
        if not any(isinstance(f, _Deprecation) for f in flwr_log.filters):
            flwr_log.addFilter(_Deprecation())
    with warnings.catch_warnings():
        # Ray leaves its log files and helper processes to the garbage collector; what it says
        # about them then is not the user's business.
        warnings.simplefilter("ignore", ResourceWarning)
        run_simulation(
            server_app=server,
            client_app=client,
            num_supernodes=split.clients,
            backend_config=backend_config or default_backend_config(),
            verbose_logging=verbose,
        )
        gc.collect()
    expected = 1 if isinstance(settings, RunSettings) else len(settings)
    if len(result) != expected:
        raise UsageError("the Flower simulation ended without a release (see its log above).")
    return result


class _Deprecation(logging.Filter):
    """Drops Flower's notice that `run_simulation` is deprecated in favour of `flwr run`: the
    Python API is what runs a simulation inside another program, and the notice would only
    puzzle whoever runs `fedeval flower simulate`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "DEPRECATED FEATURE" not in record.getMessage()


def default_backend_config(cpus: int | None = None) -> dict[str, Any]:
    """Ray on this machine's cores, one core per simulated client at a time, no GPU: a
    ClientApp's work is a few milliseconds, so more actors only add start-up time."""
    cpus = cpus or os.cpu_count() or 1
    return {
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
        "init_args": {"num_cpus": cpus, "include_dashboard": False, "log_to_driver": False},
    }


def simulate_file(
    source: str | os.PathLike[str],
    settings: RunSettings,
    *,
    columns: Columns = DEFAULT_COLUMNS,
    clients: int | None = None,
    dropout: float = 0.0,
    engine: str = ENGINE_RAY,
    rng: np.random.Generator | None = None,
    on_split: Callable[[Split], None] | None = None,
) -> Outcome:
    """Split `source` into clients and run the protocol over them on Flower's engine.

    `dropout` makes that fraction of the clients (chosen with `rng`) vanish at the report step,
    after their keys were relayed: the server recovers (federated), re-runs the round over the
    survivors (distdp) or goes on without them (localdp)."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}.")
    if not 0.0 <= dropout < 1.0:
        raise UsageError(f"`dropout` must be a fraction in [0, 1). Found {dropout}.")
    settings.job()  # every option checked before the table is read
    with tempfile.TemporaryDirectory(prefix="fedeval-flower-") as tmp:
        split = split_table(
            source,
            tmp,
            columns=columns,
            clients=clients,
            score_range=settings.score_range,
            pos_label=settings.pos_label,
        )
        if on_split is not None:
            on_split(split)
        drop: dict[int, str] = {}
        if dropout > 0:
            rng = rng if rng is not None else np.random.default_rng()
            lost = rng.choice(split.clients, size=round(dropout * split.clients), replace=False)
            drop = {int(i): "report" for i in lost}
        if engine == ENGINE_INPROCESS:
            return run_in_process(settings, split, drop=drop)
        return run_flower(settings, split, drop=drop)[0]
