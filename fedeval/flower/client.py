"""The client's side of the protocol (`fedeval.flower.job`): its rows read and capped as
`fedeval encode` reads them, its key pair, its masks agreed with its neighbours, and its reply
to each step, made with the same mechanism code as `encode` (`fedeval.privacy.registry.model_of`).
Everything it keeps between messages (its private randomness, its private key) stays in its
own state, never in a reply."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from fedeval.core.config import PrivacyConfig, PrivacyModel, Unit, config_from_dict
from fedeval.core.errors import UsageError
from fedeval.core.hierarchy import cell_index
from fedeval.flower.job import KEYS, PROBE, REPORT, REVEAL, STEPS, ClientData, Job, Payload
from fedeval.privacy import localdp, probe
from fedeval.privacy.base import ClientBatch
from fedeval.privacy.mechanism import mechanism_of
from fedeval.privacy.noise import dense, polya_share_events
from fedeval.privacy.registry import model_of
from fedeval.protocol import secagg
from fedeval.tables.read import Columns
from fedeval.tables.scored import Examples, cap_examples, read_scored


def _generator(secret: bytes, *purpose: int) -> np.random.Generator:
    """A generator for one purpose of this client, from its private 128-bit secret: the same
    purpose gives the same draws in every message of a run (the cap, the probe's slots), a
    new round gives fresh noise."""
    entropy = int.from_bytes(secret, "little")
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=purpose))


def client_secret(job: Job, index: int) -> bytes:
    """The client's private randomness for the run: 16 bytes of the OS CSPRNG, or under a
    reproducible simulation (`job.seed`) derived from the seed and `index`, the client's
    simulated identity (its partition), so the same seed gives every client the same noise
    whatever node id the engine gave it."""
    if job.seed is None:
        return os.urandom(16)
    ss = np.random.SeedSequence(job.seed, spawn_key=(index,))
    return ss.generate_state(4, np.uint32).tobytes()


@dataclass(frozen=True, eq=False)
class ClientRows:
    """One client's examples as the encoder needs them: unit-interval scores and labels, capped
    at L under unit client."""

    unit_scores: np.ndarray
    positive: np.ndarray


def read_client(data: ClientData, job: Job, secret: bytes) -> ClientRows:
    """The client's own rows, read on the run's axis and capped at L (unit client) with its
    own randomness, exactly as `fedeval encode` reads and caps one client's rows."""
    scored = read_scored(
        data.path,
        Columns(data.score_col, data.label_col, None),
        axis=job.axis,
        pos_label=job.pos_label,
        keep_scores=False,
        keep_examples=True,
        resolution=job.resolution,
        threads=1,
    )
    ex = scored.examples
    assert ex is not None  # keep_examples
    one = np.zeros(len(ex.positive), np.int64)  # every row is this client's
    scored = replace(scored, examples=Examples(ex.unit_scores, ex.positive, one), n_clients=1)
    if job.config.unit is Unit.CLIENT:
        assert job.config.max_examples is not None
        scored = cap_examples(scored, job.config.max_examples, _generator(secret, 0))
    ex = scored.examples
    assert ex is not None
    return ClientRows(ex.unit_scores, ex.positive)


def make_key_pair() -> tuple[bytes, bytes]:
    """A fresh X25519 key pair (OS CSPRNG): (private raw bytes, public raw bytes)."""
    key = X25519PrivateKey.generate()
    raw = serialization.Encoding.Raw
    private = key.private_bytes(raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return private, key.public_key().public_bytes(raw, serialization.PublicFormat.Raw)


def _pair_key(
    private: bytes, peer_public: bytes, first: int, second: int, round_id: bytes
) -> bytes:
    own = X25519PrivateKey.from_private_bytes(bytes(private))
    peer = X25519PublicKey.from_public_bytes(bytes(peer_public))
    return secagg.agree_pair_key(own, peer, first, second, round_id)


def neighbour_indices(index: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Roster indices of client `index`'s K successors and K predecessors (distances 1..K)."""
    d = np.arange(1, k + 1)
    return (index + d) % n, (index - d) % n


def client_masks(
    private: bytes,
    index: int,
    n: int,
    k: int,
    publics: Mapping[int, bytes],
    round_id: bytes,
    length: int,
) -> np.ndarray:
    """Client `index`'s total mask mod 2^32, (length,) uint32: Σ_d PRG(k(i, i+d)) −
    PRG(k(i−d, i)), each pair key agreed with the neighbour's public key (`fedeval.secagg`'s
    circulant graph and sign convention, so `secagg.recovery_correction` removes it)."""
    succ, pred = neighbour_indices(index, n, k)
    out = np.zeros(length, np.uint32)
    if k == 0:
        return out
    up = np.frombuffer(
        b"".join(_pair_key(private, publics[int(b)], index, int(b), round_id) for b in succ),
        np.uint8,
    ).reshape(k, secagg.KEY_BYTES)
    down = np.frombuffer(
        b"".join(_pair_key(private, publics[int(a)], int(a), index, round_id) for a in pred),
        np.uint8,
    ).reshape(k, secagg.KEY_BYTES)
    out += secagg.prg(up, length).sum(axis=0, dtype=np.uint32)
    out -= secagg.prg(down, length).sum(axis=0, dtype=np.uint32)
    return out


def _publics(request: Payload) -> dict[int, bytes]:
    idx = np.asarray(request["neighbours"], np.int64)
    keys = np.asarray(request["publics"], np.uint8).reshape(len(idx), secagg.KEY_BYTES)
    return {int(i): keys[j].tobytes() for j, i in enumerate(idx)}


def _localdp_slots(rows: ClientRows, config: PrivacyConfig) -> tuple[np.ndarray, np.ndarray]:
    """Every report slot of the client (its examples, then padding to L under unit client):
    labels and whether each is a real example."""
    zeros = np.zeros(len(rows.positive), np.int64)
    _, labels, _, real = localdp.padded(zeros, rows.positive, zeros, 1, config)
    return labels, real


def _probe_roles(
    rows: ClientRows, config: PrivacyConfig, secret: bytes
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which slots are probe reports (drawn from the client's secret, the same in both rounds),
    which real examples they use, and how many slots they take."""
    labels, real = _localdp_slots(rows, config)
    role = probe.roles(len(labels), config, _generator(secret, 1))
    return labels, real, role


def _probe_cells(rows: ClientRows, job: Job, n_slots: int) -> tuple[int, np.ndarray]:
    """(the probe level, each report slot's cell there): its real examples' own, the padding
    slots' 0 (their bits are all random)."""
    level = probe.probe_level(job.config.model, job.resolution)
    cells = np.zeros(n_slots, np.int64)
    own = cell_index(rows.unit_scores, level)
    cells[: len(own)] = own
    return level, cells


def client_step(
    request: Payload,
    state: dict[str, bytes],
    data: ClientData,
    *,
    allow_unmasked: bool = False,
    identity: int | None = None,
) -> Payload:
    """One client's reply to one message of the protocol. `state` is the client's own store
    across the messages of a run (its secret and its per-round private keys); it never leaves
    the client, and holds one protocol run at a time (a new run's first message clears it)."""
    step = str(request["step"])
    round_id = bytes(request["round"])
    run = bytes(request.get("run", b""))
    if state.get("run") != run:
        state.clear()
        state["run"] = run
    if step == KEYS:
        private, public = make_key_pair()
        state[f"key-{round_id.hex()}"] = private
        return {"public": np.frombuffer(public, np.uint8).copy()}
    job = Job.from_text(str(request["job"]))
    index, n, k = int(request["index"]), int(request["n"]), int(request["k"])
    masked_model = model_of(job.config.model).TRAITS.masked
    if masked_model and step != REVEAL and (not job.masked or k < 1) and not allow_unmasked:
        # A report without masks would show the server this client's data (federated) or its
        # noise share (distdp): only a measurement set up on the client's side may ask for it.
        raise UsageError("the server asked for a report without secure-aggregation masks")
    secret = state.get("secret")
    if secret is None:
        # A seeded simulation keys each client's noise by its identity (partition), else by
        # its place in the roster; a private run ignores both (OS CSPRNG).
        secret = state["secret"] = client_secret(job, index if identity is None else identity)
    # The key pair of the run's key round (`keys`: the round that made it; the masks of each
    # round are bound to that round's own id, so one key pair serves every round of a run).
    held = state.get(f"key-{bytes(request.get('keyring', round_id)).hex()}")
    if step == REVEAL:
        if held is None:
            raise UsageError("a reveal for a round this client holds no key of")
        return _reveal(request, held, index, n, k, round_id)
    # Fresh noise for every round the server runs (`attempt` counts them); a round asked twice
    # is refused, so no noise is ever drawn twice.
    attempt = int(request["attempt"])
    used = f"used-{step}-{attempt}"
    if used in state:
        raise UsageError(f"the server asked for the {step} of round {attempt} twice")
    state[used] = b""
    rows = read_client(data, job, secret)
    config = job.config
    noise = _generator(secret, 2, STEPS.index(step), attempt)
    if step == PROBE:
        if config.model is PrivacyModel.LOCALDP:
            labels, real, role = _probe_roles(rows, config, secret)
            level, cells = _probe_cells(rows, job, len(labels))
            bits = probe.client_bits_localdp(
                labels[role], cells[role], level, real[role], config, noise
            )
            return {"bits": bits.astype(np.uint8), "slots": len(labels)}
        level, cells = _probe_cells(rows, job, len(rows.positive))
        width = 2 << level
        counts = np.bincount(probe.probe_index(rows.positive, cells, level), minlength=width)
        alpha = mechanism_of(config).probe_alpha
        assert alpha is not None
        at, value = polya_share_events(n, alpha, width, noise)
        vector = (counts[:width] + dense(at, value, (width,))).astype(np.uint32)
        if k:
            if held is None:
                raise UsageError("a masked step for a round this client holds no key of")
            vector += client_masks(held, index, n, k, _publics(request), round_id, len(vector))
        return {"masked": vector}
    if step != REPORT:
        raise UsageError(f"unknown protocol step {step!r}")
    config = config_from_dict(json.loads(str(request["config"])))
    cells = cell_index(rows.unit_scores, config.height)
    if config.model is PrivacyModel.LOCALDP:
        return _local_report(rows, cells, config, job, secret, noise)
    one = np.zeros(len(cells), np.int64)
    batch = ClientBatch(cells, rows.positive, one, 1)
    reports, _ = model_of(config.model).client_reports(batch, config, n, noise)
    vector = reports[0].astype(np.uint32)  # two's complement = mod 2^32
    if k:
        if held is None:
            raise UsageError("a masked step for a round this client holds no key of")
        vector += client_masks(held, index, n, k, _publics(request), round_id, len(vector))
    return {"masked": vector}


def _local_report(
    rows: ClientRows,
    cells: np.ndarray,
    config: PrivacyConfig,
    job: Job,
    secret: bytes,
    rng: np.random.Generator,
) -> Payload:
    """Under localdp: every tree report of the client (OUE bits of one level each, packed),
    grouped by level and shuffled inside each, so no position tells a padding report."""
    positive = rows.positive
    taken = None
    if job.config.probed:
        _, real, role = _probe_roles(rows, job.config, secret)
        used = role[real]  # its real examples in their order
        cells, positive = cells[~used], positive[~used]
        taken = np.array([int(role.sum())])
    zeros = np.zeros(len(cells), np.int64)
    b_cells, b_labels, _, real = localdp.padded(cells, positive, zeros, 1, config, taken)
    group, bits = localdp.example_reports(b_cells, b_labels, config, rng, real)
    out: Payload = {"levels": np.bincount(group, minlength=len(config.levels)).astype(np.int64)}
    for i, b in enumerate(bits):
        out[f"bits-{i}"] = np.packbits(b[rng.permutation(len(b))], axis=1)
    return out


def _reveal(
    request: Payload, private: bytes, index: int, n: int, k: int, round_id: bytes
) -> Payload:
    """The pair keys this client shares with neighbours the server says sent nothing, in the
    order asked. Refused if they are all of its neighbours (its own report would be exposed) or
    if a pair is not one of its own."""
    pairs = np.asarray(request["pairs"], np.int64).reshape(-1, 2)
    peers = np.asarray(request["publics"], np.uint8).reshape(len(pairs), secagg.KEY_BYTES)
    succ, pred = neighbour_indices(index, n, k)
    mine = {(index, int(b)) for b in succ} | {(int(a), index) for a in pred}
    asked = {(int(a), int(b)) for a, b in pairs}
    if not asked <= mine:
        raise UsageError("a reveal asked for a pair key this client does not hold")
    if asked == mine:
        raise UsageError("a reveal asked for every pair key of this client: its report would be")
    keys = [
        _pair_key(private, peers[j].tobytes(), int(a), int(b), round_id)
        for j, (a, b) in enumerate(pairs)
    ]
    return {"keys": np.frombuffer(b"".join(keys), np.uint8).reshape(len(keys), 32).copy()}
