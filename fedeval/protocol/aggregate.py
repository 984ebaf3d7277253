"""The server side of the staged protocol: check report directories, sum them, unmask.

Each directory is one cohort (`fedeval.protocol.report_files`). The server verifies the manifest's
seal (and
signature, given a key) and every file's SHA-256 before it trusts a byte, refuses stray files,
duplicate clients, mixed parameters, cohorts below the minimum size and a population the cohorts
exceed, sums the masked reports mod 2^32 (the masks cancel), removes the masks of dropped
clients with the keys their neighbours revealed, and yields the `Release`: exactly what the
server may learn, and nothing per client. Every cohort's sum is private on its own (distdp
shares are sized to the cohort), so cohorts add up without weakening the claim.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fedeval.core.axis import ScoreAxis
from fedeval.core.config import PrivacyConfig, Unit
from fedeval.core.errors import FedevalError, InputError, UsageError
from fedeval.core.release import Probe, Release, level_offsets
from fedeval.documents.files import load_document
from fedeval.privacy.mechanism import mechanism_from_section, mechanism_of
from fedeval.privacy.registry import model_of
from fedeval.protocol import report_files as rf
from fedeval.protocol import secagg
from fedeval.protocol.encode import MIN_COHORT, check_min_cohort


@dataclass(frozen=True)
class AggregateSummary:
    """What the server summed: per cohort, clients expected, reported and recovered."""

    release: Release
    axis: ScoreAxis
    cohorts: int
    clients: int  # in the cohorts' rosters
    reported: int  # clients whose reports arrived
    recovered: int  # dropped clients whose masks were removed from revealed seeds
    bytes_read: int


@dataclass(frozen=True)
class _Cohort:
    directory: Path
    manifest: dict[str, Any]
    config: PrivacyConfig
    population: int
    axis: ScoreAxis
    clients: int
    seeded: bool
    probe: Probe | None = None  # round 1 of a two-phase release (the manifest states it)


def _bad(directory: Path, what: str) -> InputError:
    return InputError(f"'{directory}' is not a valid report directory: {what}.")


def _read_manifest(directory: Path, verify_key: Any = None, min_cohort: int = 2) -> _Cohort:
    if not directory.is_dir():
        raise InputError(
            f"cannot read reports '{directory}': "
            + ("no such directory." if not directory.exists() else "it is not a directory.")
        )
    doc = load_document(
        directory / rf.MANIFEST,
        prefix=rf.SCHEMA_PREFIX,
        version=rf.VERSION,
        noun="the manifest",
        kind="a report manifest",
        hint="Make a report directory with `fedeval encode FILE -o reports/`.",
        verify_key=verify_key,
    )
    if doc["schema"] != rf.SCHEMA:
        raise _bad(
            directory,
            f"'{doc['schema']}' reports carried each client's exact number of examples and "
            "non-cryptographic masks; re-encode with this version",
        )
    try:
        mech = mechanism_from_section(doc["privacy"])
        config, seeded, probe = mech.config, mech.seeded, mech.probe
        lo, hi = (float(x) for x in doc["score_range"])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError("score_range must be two finite numbers lo < hi")
        axis = ScoreAxis.from_dict(doc)
        population = int(doc["population"])
        clients = int(doc["cohort"]["clients"])
        if not 1 <= clients <= population:
            raise ValueError(f"a cohort of {clients} clients in a population of {population}")
        masked = model_of(config.model).TRAITS.masked
        if masked:
            sa = doc["secure_aggregation"]
            if int(sa["modulus"]) != 1 << secagg.MODULUS_BITS:
                raise ValueError(f"unsupported modulus {sa['modulus']}")
            if int(doc["report"]["length"]) != int(level_offsets(config)[-1]):
                raise ValueError("the report length does not match the released levels")
        for part in doc["parts"]:
            if not {"file", "sha256", "rows"} <= set(part):
                raise ValueError("every part needs 'file', 'sha256' and 'rows'")
    except KeyError as e:
        raise _bad(directory, f"manifest field {e} is missing") from None
    except (FedevalError, TypeError, ValueError) as e:
        raise _bad(directory, f"manifest: {e}") from None
    floor = max(min_cohort, config.cohort_floor)
    if clients < floor:
        why = (
            "its sum would say too much about each client"
            if clients < min_cohort
            else f"its shares were sized for cohorts of at least {floor} clients with "
            f"{config.colluders} colluders tolerated"
        )
        raise InputError(
            f"'{directory}': a cohort of {clients} clients is below the minimum of {floor}; "
            f"{why}. Nothing was aggregated."
        )
    return _Cohort(directory, doc, config, population, axis, clients, seeded, probe)


def _verified(directory: Path, entry: dict[str, Any]) -> bytes:
    """A listed file's bytes, if they hash to what the manifest says."""
    name = str(entry["file"])
    if Path(name).name != name:
        raise _bad(directory, f"manifest lists '{name}', which is not a file name")
    path = directory / name
    try:
        # A part is a regular file inside the report directory: a symlink out of it (to
        # /dev/zero, a FIFO, another run's file) would hang the read or smuggle data in.
        if path.exists() and (
            not path.is_file() or directory.resolve() not in path.resolve().parents
        ):
            raise InputError(
                f"'{path}' is not a regular file inside '{directory}' (a symlink out of it, a "
                "FIFO or a device): refused, nothing was aggregated.",
                file=str(path),
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(
            f"'{path}' is listed in the manifest but missing: its clients' reports never "
            "arrived. Restore the file, or re-encode."
        ) from None
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror or e}.") from None
    if rf.sha256(data) != entry["sha256"]:
        raise InputError(
            f"'{path}' does not match its SHA-256 in the manifest: the file was changed or "
            "truncated after encoding. Nothing was aggregated."
        )
    return data


def _table(directory: Path, entry: dict[str, Any], schema: pa.Schema) -> pa.Table:
    path = directory / entry["file"]
    try:
        table = pq.read_table(io.BytesIO(_verified(directory, entry)))
    except pa.ArrowException as e:
        raise InputError(f"'{path}' is not a readable Parquet file: {e}") from None
    if not table.schema.equals(schema, check_metadata=False):
        raise InputError(f"'{path}' has columns {table.schema} but reports need {schema}.")
    if table.num_rows != int(entry["rows"]):
        raise InputError(
            f"'{path}' holds {table.num_rows} rows; the manifest lists {entry['rows']}."
        )
    return table


def _check_no_strays(cohort: _Cohort) -> None:
    listed = {rf.MANIFEST, cohort.manifest["cohort"]["roster"]["file"]}
    listed |= {p["file"] for p in cohort.manifest["parts"]}
    if cohort.manifest.get("recovery"):
        listed.add(cohort.manifest["recovery"]["file"])
    strays = sorted(p.name for p in cohort.directory.iterdir() if p.name not in listed)
    if strays:
        raise InputError(
            f"'{cohort.directory}' holds files its manifest does not list ({', '.join(strays)}): "
            "a stray or duplicated report file. Remove them; nothing was aggregated."
        )


def _sum_cohort(
    cohort: _Cohort, progress: Callable[[int, int], None] | None
) -> tuple[Release, int, int, int]:
    """The cohort's unmasked sum, clients reported, clients recovered, bytes read."""
    cfg, n, d = cohort.config, cohort.clients, cohort.directory
    width = int(level_offsets(cfg)[-1])
    masked = model_of(cfg.model).TRAITS.masked
    seen = np.zeros(n, bool)
    total = np.zeros(width, np.uint32)
    local_counts = np.zeros(width, np.int64)
    reporters = np.zeros(len(cfg.levels), np.int64)
    off = level_offsets(cfg)
    bytes_read = 0
    clients_seen: list[np.ndarray] = []
    parts = cohort.manifest["parts"]
    schema = rf.masked_schema(width) if masked else rf.LOCAL_SCHEMA
    for j, entry in enumerate(parts):
        table = _table(d, entry, schema)
        bytes_read += int(entry.get("bytes", 0))
        where = f"'{d / entry['file']}'"
        client = table["client"].to_numpy()
        if len(client) and int(client.max()) >= n:
            raise InputError(f"{where}: client index {int(client.max())} is outside the cohort.")
        if masked:
            if len(np.unique(client)) != len(client) or seen[client].any():
                dup = client[seen[client]] if seen[client].any() else client
                raise InputError(f"{where}: client index {int(dup[0])} reports twice.")
            seen[client] = True
            flat = pc.list_flatten(table["report"]).to_numpy()
            total += flat.reshape(-1, width).sum(axis=0, dtype=np.uint32)
        else:
            # Several rows per client (one per report); a client's rows sit in one part.
            clients_seen.append(client)
            u = np.unique(client)
            if seen[u].any():
                raise InputError(f"{where}: client index {int(u[seen[u]][0])} reports twice.")
            seen[u] = True
            level = table["level"].to_numpy()
            if len(level) and int(level.max()) >= len(cfg.levels):
                raise InputError(f"{where}: level index {int(level.max())} is not released.")
            bits = table["bits"]
            for i, k in enumerate(cfg.levels):
                sel = np.flatnonzero(level == i)
                if len(sel) == 0:
                    continue
                nbytes = ((2 << k) + 7) // 8
                raw = _fixed_width(pc.take(bits, pa.array(sel)).combine_chunks(), nbytes)
                if raw is None:
                    raise InputError(f"{where}: a level-{k} report must hold {nbytes} bytes.")
                unpacked = np.unpackbits(raw.reshape(len(sel), nbytes), axis=1, count=2 << k)
                local_counts[off[i] : off[i + 1]] += unpacked.sum(axis=0, dtype=np.int64)
                reporters[i] += len(sel)
        if progress is not None:
            progress(j + 1, len(parts))

    missing = np.flatnonzero(~seen)
    recovered = 0
    if masked:
        if len(missing):
            total += _recovery(cohort, missing)
            recovered = len(missing)
        counts = unmasked(total)
    else:
        counts = local_counts
        if cfg.unit is Unit.CLIENT and clients_seen:
            per_client = np.bincount(np.concatenate(clients_seen).astype(np.int64), minlength=n)
            # After a probe round a client's other slots went to the probe: at most L here.
            cap = int(cfg.max_examples or 0)
            sent = per_client[seen]
            if np.any(sent > cap) or (not cfg.probed and np.any(sent != cap)):
                raise InputError(
                    f"'{d}': under unit client every client sends exactly {cfg.max_examples} "
                    "reports; some sent another number. Nothing was aggregated."
                )
    release = Release.of_cohort(
        cfg,
        counts,
        reporters,
        int(seen.sum()),
        cohort.probe,
        clients_public=mechanism_of(cfg).clients_public,
    )
    if cohort.seeded:
        release = replace(release, seeded=True)
    return release, int(seen.sum()), recovered, bytes_read


def unmasked(total: np.ndarray) -> np.ndarray:
    """Signed counts from a cohort's sum mod 2^32, once every mask has cancelled (int64)."""
    return total.view(np.int32).astype(np.int64)


def _fixed_width(arr: pa.BinaryArray, nbytes: int) -> np.ndarray | None:
    """The values of a binary array as an (m, nbytes) uint8 matrix; None if any has another
    length (or is null)."""
    m = len(arr)
    if arr.null_count:
        return None
    offsets = np.frombuffer(arr.buffers()[1], np.int32, count=m + 1, offset=4 * arr.offset)
    if np.any(np.diff(offsets) != nbytes):
        return None
    data = np.frombuffer(arr.buffers()[2], np.uint8)
    return data[offsets[0] : offsets[-1]].reshape(m, nbytes)


def _recovery(cohort: _Cohort, missing: np.ndarray) -> np.ndarray:
    """The correction that removes dropped clients' uncancelled masks, from revealed seeds."""
    d, n, cfg = cohort.directory, cohort.clients, cohort.config
    if model_of(cfg.model).TRAITS.shares_noise:
        raise InputError(
            f"'{d}': {len(missing)} of {n} clients sent no report. Under distdp their noise "
            "shares are lost with them, so the sum would be less private than the claimed ε; "
            "it is refused. Re-run the round with every client (or with federated/localdp)."
        )
    entry = cohort.manifest.get("recovery")
    if not entry:
        raise InputError(
            f"'{d}': {len(missing)} of {n} clients sent no report and no recovery seeds are "
            "present, so their neighbours' masks cannot be removed. Restore the missing part "
            "files (the manifest lists them)."
        )
    k = int(cohort.manifest["secure_aggregation"]["neighbours_per_side"])
    exposed = secagg.exposed_survivors(missing, n, k)
    if len(exposed):
        raise InputError(
            f"'{d}': {len(exposed)} surviving client(s) lost every masking neighbour; revealing "
            "their keys would expose their reports, so the cohort is not unmasked. Re-run the "
            "round (or encode with more `neighbours`)."
        )
    table = _table(d, entry, rf.RECOVERY_SCHEMA)
    need_first, need_second = secagg.broken_pairs(missing, n, k)
    first = table["first"].to_numpy().astype(np.int64)
    second = table["second"].to_numpy().astype(np.int64)
    order = np.lexsort((second, first))
    if not (
        np.array_equal(first[order], need_first) and np.array_equal(second[order], need_second)
    ):
        raise InputError(
            f"'{d / entry['file']}': the revealed seeds do not cover exactly the pairs between "
            f"the {len(missing)} missing clients and their neighbours; cannot unmask."
        )
    missing_mask = np.zeros(n, bool)
    missing_mask[missing] = True
    width = int(level_offsets(cfg)[-1])
    keys = rf.key_matrix(table["key"])[order]
    return secagg.recovery_correction(need_first, need_second, keys, missing_mask, width)


def _probe_key(probe: Probe | None) -> object:
    return None if probe is None else probe.to_dict()


def _same(a: _Cohort, b: _Cohort) -> None:
    for what, x, y in (
        ("privacy parameters", a.config, b.config),
        ("probe rounds", _probe_key(a.probe), _probe_key(b.probe)),
        ("population", a.population, b.population),
        ("score axis", a.axis.to_dict(), b.axis.to_dict()),
    ):
        if x != y:
            raise InputError(
                f"'{a.directory}' and '{b.directory}' were encoded with different {what} "
                f"({x} and {y}); reports of one protocol run must share them."
            )


def _check_distinct_clients(cohorts: list[_Cohort], rosters: list[bytes]) -> None:
    """No client id in two cohorts' rosters (the verified roster bytes of each cohort)."""
    if len(cohorts) < 2:
        return
    seen: dict[Path, pa.Array] = {}
    for c, blob in zip(cohorts, rosters, strict=True):
        roster = pq.read_table(io.BytesIO(blob))
        ids = roster.column(0)
        if len(ids) != c.clients:
            raise _bad(c.directory, f"the roster lists {len(ids)} clients, not {c.clients}")
        for other, prev in seen.items():
            both = pc.is_in(ids, value_set=prev)
            if pc.any(both).as_py():
                dup = ids.filter(both)[0].as_py()
                raise InputError(
                    f"client {dup!r} is in both '{other}' and '{c.directory}': a client may "
                    "report once per protocol run."
                )
        seen[c.directory] = ids.combine_chunks()


def aggregate_reports(
    directories: Sequence[str | Path],
    *,
    population: int | None = None,
    min_cohort: int = MIN_COHORT,
    verify_key: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> AggregateSummary:
    """Verify and sum report directories into the release of one protocol run.

    `population`, when given, is what the server expects; the manifests must agree, and the
    cohorts may not exceed it (fewer clients are accepted: every cohort's sum carries its own
    noise). Cohorts below `min_cohort` clients are refused. `verify_key` (Ed25519 public key)
    requires every manifest to be signed by it.
    """
    min_cohort = check_min_cohort(min_cohort)
    if not directories:
        raise UsageError("give at least one report directory.")
    paths = [Path(d) for d in directories]
    if len(set(p.resolve() for p in paths)) != len(paths):
        raise UsageError("a report directory is given twice; each cohort may be summed once.")
    cohorts = [_read_manifest(p, verify_key, min_cohort) for p in paths]
    for c in cohorts[1:]:
        _same(cohorts[0], c)
    first = cohorts[0]
    if population is not None and population != first.population:
        raise InputError(
            f"'{first.directory}' was encoded for a population of {first.population:,} clients, "
            f"not {population:,}."
        )
    for c in cohorts:
        _check_no_strays(c)
    rosters = [_verified(c.directory, c.manifest["cohort"]["roster"]) for c in cohorts]
    _check_distinct_clients(cohorts, rosters)
    in_cohorts = sum(c.clients for c in cohorts)
    if in_cohorts > first.population:
        raise InputError(
            f"the cohorts hold {in_cohorts:,} clients, more than the population of "
            f"{first.population:,} they were encoded for."
        )
    releases, reported, recovered, nbytes = [], 0, 0, 0
    for c in cohorts:
        r, rep, rec, b = _sum_cohort(c, progress)
        releases.append(r)
        reported, recovered, nbytes = reported + rep, recovered + rec, nbytes + b
    return AggregateSummary(
        sum(releases[1:], start=releases[0]),
        first.axis,
        len(cohorts),
        in_cohorts,
        reported,
        recovered,
        nbytes,
    )
