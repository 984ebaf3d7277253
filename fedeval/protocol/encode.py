"""The client side of the staged protocol: every client's report, written as a report directory.

Each client runs the per-client reference encoder of its privacy model (one-hot level counts;
plus a Pólya noise share sized to its cohort under distdp; OUE bits under localdp, exactly L
reports per client under unit client), then, under federated and distdp, adds its pairwise
secure-aggregation masks (`fedeval.protocol.secagg`: keys from the OS CSPRNG, expanded by a stream
cipher, never derived from --seed). A cohort smaller than `min_cohort` clients is refused: its
sum would say too much about each of them. Clients are processed in batches
of bounded size, and the directory appears only when it is complete (written beside its final
name, then renamed), so a failed run never leaves a partial one.

With the same seed, the reports sum to exactly the release of the one-shot per-client path
(`fedeval.protocol.simulate.per_client_release`): the simulator is the deployed encoder.

`--height auto` under distdp or localdp is two-phase (`fedeval.privacy.probe`): the encoder
plays round 1 itself (`fedeval.protocol.simulate.probe_round`: every client's probe share, or the
probe
reports of a random share of the report slots), writes the probe's released counts and the
height chosen from them into the manifest's privacy section, then encodes the tree at that
height. A deployment runs round 1 as its own secure-aggregation round (localdp: its own upload
of the probe reports) and broadcasts the height before round 2; so the cohort must be the whole
population (several cohorts must share one probe, which one encoder cannot play).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Unpack

import numpy as np
import pyarrow as pa

from fedeval.core.axis import release_axis
from fedeval.core.config import PrivacyConfig, Unit
from fedeval.core.errors import UsageError
from fedeval.core.hierarchy import cell_index
from fedeval.core.release import level_offsets
from fedeval.core.spec import ReleaseKeywords, ReleaseSpec, release_spec
from fedeval.core.version import __version__
from fedeval.documents.seals import seal
from fedeval.privacy import localdp
from fedeval.privacy.base import ClientBatch
from fedeval.privacy.mechanism import mechanism_of
from fedeval.privacy.registry import model_of
from fedeval.protocol import report_files as rf
from fedeval.protocol import secagg
from fedeval.protocol.simulate import batch_width, client_batches, probe_round, rng_and_seed
from fedeval.tables.read import DEFAULT_COLUMNS, Columns
from fedeval.tables.scored import cap_examples, read_scored

MAX_CELLS = 1 << 22
"""Report entries held in memory per batch of clients (16 MB of uint32); one part per batch."""

MIN_COHORT = 10
"""Smallest cohort `encode` makes and `aggregate` accepts by default: the server learns each
cohort's sum, which for a handful of clients says much about each (for one client, everything)."""

ABSOLUTE_MIN_COHORT = 2
"""No option lowers the minimum below this: a one-client cohort would send its report bare."""


def check_min_cohort(min_cohort: int) -> int:
    if isinstance(min_cohort, bool) or not isinstance(min_cohort, int):
        raise UsageError(f"`min_cohort` must be an integer. Found {min_cohort!r}.")
    if min_cohort < ABSOLUTE_MIN_COHORT:
        raise UsageError(
            f"`min_cohort` must be at least {ABSOLUTE_MIN_COHORT}: a one-client cohort's sum is "
            f"its report. Found {min_cohort}."
        )
    return min_cohort


@dataclass(frozen=True)
class EncodeSummary:
    """What `encode` wrote: the configuration, the cohort, and the report sizes."""

    directory: str
    config: PrivacyConfig
    population: int
    clients: int
    examples: int
    dropped_examples: int
    dropped_out: int
    parts: int
    report_bytes: int  # Parquet bytes of every report file (parts only)
    bytes_per_client: float  # one report: a client's masked vector, or (localdp) one example's
    neighbours: int
    seed: int | None  # only for a seeded (reproducible, not private) run


def report_length(config: PrivacyConfig) -> int:
    """Entries of a masked report: every released node (no example count: it would tell the
    server each cohort's exact number of examples)."""
    return int(level_offsets(config)[-1])


def bytes_per_report(config: PrivacyConfig) -> float:
    """Payload one client sends per report: 4 bytes per masked entry, or under localdp one
    level's OUE bits (2·2^k, packed into whole bytes) and the level's index, averaged over the
    levels (one such report per example)."""
    return model_of(config.model).report_bytes(config)


def masked_reports(
    cells: np.ndarray,
    labels: np.ndarray,
    client: np.ndarray,
    c0: int,
    c1: int,
    n: int,
    k: int,
    key: bytes,
    config: PrivacyConfig,
    rng: np.random.Generator,
) -> np.ndarray:
    """What clients c0..c1−1 of a cohort of n send under federated/distdp: their reports
    (`client` holds indices relative to c0), each plus its pairwise masks, (c1 − c0, D) uint32.
    Noise shares are sized to the cohort of n."""
    rows = ClientBatch(cells, labels, client, c1 - c0)
    reports, _ = model_of(config.model).client_reports(rows, config, n, rng)
    vectors = reports.astype(np.uint32)  # two's complement = mod 2^32
    vectors += secagg.cohort_masks(key, c0, c1, n, k, vectors.shape[1])
    return vectors


def local_reports(
    cells: np.ndarray,
    labels: np.ndarray,
    client: np.ndarray,
    c0: int,
    c1: int,
    config: PrivacyConfig,
    rng: np.random.Generator,
    taken: np.ndarray | None = None,
) -> pa.Table:
    """What clients c0..c1−1 send under localdp, one row per report (`client` relative to c0).

    Padded per batch, as the per-client path does, so one seed gives both the same reports:
    exactly L reports per client under unit client, less the `taken` slots per client that the
    probe round of a two-phase release used."""
    b_cells, b_labels, b_client, real = localdp.padded(
        cells, labels, client, c1 - c0, config, taken
    )
    group, bits = localdp.example_reports(b_cells, b_labels, config, rng, real)
    return _local_table(b_client + c0, group, bits)


@contextlib.contextmanager
def _staging_dir(target: Path) -> Iterator[Path]:
    """A fresh directory beside `target`, renamed to it on success and removed on failure."""
    if target.is_symlink():
        raise UsageError(
            f"'{target}' is a symbolic link; name a new directory for the reports (encode "
            "replaces only an empty directory, never a link)."
        )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(
            f"'{target}' already exists and is not an empty directory; choose a new directory "
            "for the reports (encode never mixes two runs' reports)."
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as e:
        raise UsageError(f"cannot write '{target}': {e.strerror or e}.") from e
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _local_table(client: np.ndarray, group: np.ndarray, bits: list[np.ndarray]) -> pa.Table:
    """One row per example: its client, its level index and its packed OUE bits."""
    tables = []
    for i, b in enumerate(bits):
        sel = group == i
        packed = np.packbits(b, axis=1)
        m, w = packed.shape
        offsets = pa.py_buffer((np.arange(m + 1, dtype=np.int32) * w).tobytes())
        arr = pa.Array.from_buffers(pa.binary(), m, [None, offsets, pa.py_buffer(packed.tobytes())])
        tables.append(
            pa.table(
                {
                    "client": pa.array(client[sel].astype(np.uint32)),
                    "level": pa.array(np.full(m, i, np.uint8)),
                    "bits": arr,
                },
                schema=rf.LOCAL_SCHEMA,
            )
        )
    return pa.concat_tables(tables)


def _masked_table(client: np.ndarray, vectors: np.ndarray) -> pa.Table:
    length = vectors.shape[1]
    values = pa.array(vectors.ravel())
    return pa.table(
        {
            "client": pa.array(client.astype(np.uint32)),
            "report": pa.FixedSizeListArray.from_arrays(values, length),
        },
        schema=rf.masked_schema(length),
    )


def encode_file(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    spec: ReleaseSpec | None = None,
    columns: Columns = DEFAULT_COLUMNS,
    population: int | None = None,
    score_range: tuple[float, float] = (0.0, 1.0),
    thresholds: Sequence[float] | None = None,
    pos_label: object = None,
    neighbours: int | None = None,
    dropout: float = 0.0,
    min_cohort: int = MIN_COHORT,
    colluders: int = 0,
    sign_key: Any = None,
    max_cells: int = MAX_CELLS,
    progress: Callable[[int, int], None] | None = None,
    **release: Unpack[ReleaseKeywords],
) -> EncodeSummary:
    """Encode every client of a table into a report directory (one cohort).

    `population` is the number of clients of the whole run, over all its cohorts (default: the
    clients in this table); the server checks it. Under distdp each noise share is sized to
    this cohort, so its sum is private on its own. `neighbours` is K, the masking neighbours per
    side (default ⌈log2 n⌉). `min_cohort` refuses smaller cohorts. `dropout`
    simulates that fraction of the cohort's clients vanishing after masking: their reports are
    not written and the survivors reveal the seeds they shared with them (federated only; under
    distdp a dropout would leave the noise short of the claim and is refused). `thresholds`
    declared here become cell edges of the release (`fedeval.core.axis`): precision, recall and
    accuracy there need no interpolation; the manifest states the edges. Without them, the
    thresholds the one-shot `evaluate` declares (1/11 … 10/11 of the range), so both paths make
    the same release. `colluders` t (distdp, below `min_cohort`) sizes every noise share
    Pólya(1/(m − t), α): the claim then holds against a server that colludes with up to t
    clients of the cohort. The release is `spec`, or the one `release`'s keywords make
    (`fedeval.core.spec.ReleaseSpec`: distdp by default, as every entry point); its `seed`
    makes a reproducible simulation (its `path` and `ci_draws` do not apply: encode makes
    every client's report and no interval).
    """
    spec = release_spec(spec, release)
    lo, hi = (float(x) for x in score_range)
    if thresholds is not None:
        t = np.asarray(thresholds, dtype=np.float64)
        if t.ndim != 1 or not np.all((t >= lo) & (t <= hi)):
            raise UsageError(
                f"thresholds must be numbers in the score range [{lo:g}, {hi:g}]. Found "
                f"{list(thresholds)}."
            )
    # The one-shot `evaluate`'s defaults: without thresholds, 1/11 … 10/11 of the range.
    axis = release_axis((lo, hi), thresholds, spec.height)
    data = read_scored(
        source,
        columns,
        axis=axis,
        pos_label=pos_label,
        keep_scores=False,
        keep_examples=True,
        resolution=spec.resolution(),
    )
    config = spec.config(n=data.rows, min_height=data.axis.auto_floor(data.resolution))
    n = data.n_clients
    min_cohort = check_min_cohort(min_cohort)
    if isinstance(colluders, bool) or not isinstance(colluders, int) or colluders < 0:
        raise UsageError(f"`colluders` must be an integer ≥ 0. Found {colluders!r}.")
    if colluders:
        config = replace(config, colluders=colluders, cohort_floor=min_cohort)
    if n < min_cohort:
        raise UsageError(
            f"'{source}' holds {n} clients: a cohort needs at least {min_cohort} (the server "
            "learns each cohort's sum). Merge clients into larger cohorts, or lower `min_cohort` "
            f"(at least {ABSOLUTE_MIN_COHORT})."
        )
    if population is None:
        population = n
    if isinstance(population, bool) or not isinstance(population, int) or population < n:
        raise UsageError(
            f"`population` is the number of clients the protocol is set up for, at least the "
            f"{n:,} clients in '{source}'. Found {population!r}."
        )
    if config.probed and population != n:
        raise UsageError(
            f"`height` auto under {config.model.value} is two-phase: a probe round over every "
            "client of the run chooses the height before any tree report is made, and this "
            f"encoder holds {n:,} of the {population:,} clients. Encode the whole population "
            "as one cohort, or give every cohort the same `height` (e.g. from `fedeval plan`)."
        )
    if not 0.0 <= dropout < 1.0:
        raise UsageError(f"`dropout` must be a fraction in [0, 1). Found {dropout}.")
    if dropout > 0 and model_of(config.model).TRAITS.shares_noise:
        raise UsageError(
            "`dropout` cannot be simulated under distdp: a client that drops out takes its noise "
            "share with it, and the sum would be less private than claimed. Use federated, or "
            "localdp (where reports need no masks)."
        )
    if neighbours is not None and (isinstance(neighbours, bool) or neighbours < 1):
        raise UsageError(f"`neighbours` must be a positive integer. Found {neighbours!r}.")
    rng, seed_used = rng_and_seed(spec.seed)
    # Children in the order `simulate` spawns them (intervals, cap), so one seed gives the
    # one-shot per-client path and `encode` the same reports; then the simulated network.
    # Masking keys never come from the seed (`secagg.round_key` reads the OS CSPRNG).
    _, cap_rng, _, network_rng = rng.spawn(4)
    if config.unit is Unit.CLIENT:
        data = cap_examples(data, config.examples_per_unit, cap_rng)
    ex = data.examples
    if ex is None:
        raise AssertionError("the table was read without keeping its examples")
    # Round 1 of a two-phase `auto` (distdp, localdp): the encoder plays the probe round over
    # the whole cohort, as the per-client path does, and releases the tree at its height.
    rnd = probe_round(data, config, rng, max_cells) if config.probed else None
    if rnd is not None:
        config = rnd.config
    cells = cell_index(ex.unit_scores, config.height)
    masked = model_of(config.model).TRAITS.masked
    k = secagg.neighbours_per_side(n, neighbours) if masked else 0
    key = secagg.round_key()
    missing = np.zeros(n, bool)
    if dropout > 0:
        missing[network_rng.choice(n, size=round(dropout * n), replace=False)] = True
    claim = mechanism_of(
        config, seeded=seed_used is not None, probe=None if rnd is None else rnd.probe
    )
    width = int(level_offsets(config)[-1])
    length = width

    with _staging_dir(Path(output)) as tmp:
        parts: list[dict[str, Any]] = []
        total_bytes = 0
        for c0, c1, sel in client_batches(ex.client, n, batch_width(config), max_cells):
            if masked:
                vectors = masked_reports(
                    cells[sel], ex.positive[sel], ex.client[sel] - c0, c0, c1, n, k, key, config,
                    rng,
                )  # fmt: skip
                ids = np.arange(c0, c1)
                keep = ~missing[c0:c1]
                table = _masked_table(ids[keep], vectors[keep])
            else:
                # Padded per batch, as the per-client path does, so a seed gives both the same
                # reports: exactly L per client under unit client (less the probe's slots).
                kw = {}
                if rnd is not None:
                    sel, kw = rnd.tree_rows(sel), rnd.taken_by(c0, c1)
                table = local_reports(
                    cells[sel], ex.positive[sel], ex.client[sel] - c0, c0, c1, config, rng, **kw
                )
                if missing[c0:c1].any():
                    table = table.filter(pa.array(~missing[table["client"].to_numpy()]))
            blob = rf.parquet_bytes(table)
            path = tmp / rf.part_name(len(parts))
            rf.write_bytes(path, blob)
            parts.append(rf.file_entry(path, table.num_rows, blob) | {"clients": [c0, c1 - 1]})
            total_bytes += len(blob)
            if progress is not None:
                progress(c1, n)

        ids = data.client_ids if data.client_ids is not None else pa.array(np.arange(n))
        roster_blob = rf.parquet_bytes(pa.table({"client": ids}))
        rf.write_bytes(tmp / rf.ROSTER, roster_blob)
        recovery = None
        if masked and missing.any():
            first, second = secagg.broken_pairs(np.flatnonzero(missing), n, k)
            rec = pa.table(
                {
                    "first": pa.array(first.astype(np.uint32)),
                    "second": pa.array(second.astype(np.uint32)),
                    "key": rf.key_array(secagg.pair_keys(key, first, second)),
                },
                schema=rf.RECOVERY_SCHEMA,
            )
            blob = rf.parquet_bytes(rec)
            rf.write_bytes(tmp / rf.RECOVERY, blob)
            recovery = rf.file_entry(tmp / rf.RECOVERY, rec.num_rows, blob)
        if masked:
            layout = "one row per client: masked counts of every released node"
        elif config.unit is Unit.CLIENT:
            layout = (
                f"one row per report, exactly {config.max_examples} per client (empty reports "
                "pad a client with fewer examples): level index and packed OUE bits"
            )
        else:
            layout = "one row per example: level index and packed OUE bits of that level"
        manifest = {
            "schema": rf.SCHEMA,
            "fedeval_version": __version__,
            "privacy": claim.section(),
            **data.axis.to_dict(),
            "population": population,
            "cohort": {
                "clients": n,
                "roster": rf.file_entry(tmp / rf.ROSTER, n, roster_blob),
            },
            "report": {"layout": layout, "length": length if masked else None},
            "secure_aggregation": {
                "scheme": "pairwise additive masks over a circulant graph",
                "modulus": 1 << secagg.MODULUS_BITS,
                "neighbours_per_side": k,
                "prg": secagg.PRG_NAME,
                "min_cohort": min_cohort,
            }
            if masked
            else None,
            "parts": parts,
            "recovery": recovery,
        }

        manifest = seal(manifest, sign_key=sign_key)
        rf.write_bytes(
            tmp / rf.MANIFEST, (json.dumps(manifest, indent=2, allow_nan=False) + "\n").encode()
        )
    return EncodeSummary(
        str(output),
        config,
        population,
        n,
        data.rows,
        data.dropped,
        int(missing.sum()),
        len(parts),
        total_bytes,
        bytes_per_report(config),
        k,
        seed_used,
    )
