"""The protocol as messages: what each client computes and what the server does with the replies.

Nothing here imports Flower. A message is a plain dict of str → int, float, str, bytes or a numpy
array (`fedeval.flower.records` turns it into a Flower `RecordDict` and back), so the same steps
run over Flower's simulation engine, over SuperLink/SuperNodes, or called in process
(`fedeval.flower.inprocess`) with no engine at all.

One protocol run (`ServerProtocol.run`), over the cohort of nodes that answer:

1. ``keys``: every client makes a fresh X25519 key pair for the run (OS CSPRNG) and replies
   with its public key. The private key stays in the client's own state; the server never sees
   one. Every later round binds its pair keys to its own random round id (HKDF info), so the
   masks of different rounds are independent and a pair key revealed for one round says
   nothing of another; a new key round is needed only for a node that missed this one.
   Roster indices are the nodes' ids in sorted order (Flower's ids are random, so the order
   says nothing about the data).
2. ``probe`` (two-phase ``--height auto`` under distdp or localdp, `fedeval.privacy.probe`):
   distdp, each client's class totals plus a Pólya share sized to the cohort, masked; localdp,
   each report slot is a probe report with probability s and its two OUE bits are sent bare
   (local DP needs no masks). The server sums them, releases the noisy totals and chooses the
   height from them alone (`fedeval.privacy.probe.height`), then broadcasts it with step 3.
3. ``report``: the client's report as `fedeval encode` makes it, with the same mechanism code
   (`fedeval.privacy.mechanism_for(model).client_reports`: one-hot level counts; plus a Pólya
   share sized to the cohort under distdp; OUE reports under localdp, exactly L per client
   under unit client), then under federated and distdp its pairwise masks: for each of its 2K
   neighbours on the circulant graph (`fedeval.secagg`), the pair key agreed with the
   neighbour's relayed public key (`secagg.agree_pair_key`: X25519 + HKDF-SHA256 bound to the
   ordered pair and the round), expanded by AES-256-CTR (`secagg.prg`) and added or subtracted
   mod 2^32. The masks cancel in the cohort's sum; one report is uniform to the server.
4. Dropouts. Federated: the survivors reveal the pair keys they shared with the clients that
   sent nothing (``reveal``), and the server removes the masks that no longer cancel
   (`secagg.recovery_correction`), unless a survivor lost every neighbour (its report would be
   exposed: `secagg.exposed_survivors`), when the round is re-run. Distdp: a lost client takes
   its noise share with it, so the sum would carry less noise than the claim; nothing is
   revealed and the round is re-run over the survivors with fresh masks and shares sized to
   them (the first round's sum is never unmasked). Localdp: reports need no masks; a lost
   client's reports are simply absent. At most `retries` re-runs, and never below
   `min_cohort` clients.

The server keeps only sums: the release (`fedeval.release.Release.of_cohort`, which drops
every exact count the mechanism may not publish) is what it writes, sealed, in the schema
`fedeval aggregate` writes (`fedeval.releasefile`).

Trust: as in `fedeval.secagg`, the server is honest but curious: it relays public keys
faithfully, reports dropouts truthfully and discards a late reply from a client it declared
lost (a late masked report after a reveal would be unmasked). Each client refuses a reveal that
would expose all of its own keys.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from fedeval import secagg
from fedeval.aggregate import unmasked
from fedeval.axis import ScoreAxis
from fedeval.config import PrivacyConfig, PrivacyModel, Unit, config_dict, config_from_dict
from fedeval.data import Examples, cap_examples, read_scored
from fedeval.encode import ABSOLUTE_MIN_COHORT, MIN_COHORT
from fedeval.errors import InputError, UsageError
from fedeval.hierarchy import cell_index
from fedeval.io import Columns
from fedeval.privacy import localdp, mechanism_for, probe
from fedeval.privacy.mechanism import mechanism_of
from fedeval.privacy.noise import dense, polya_share_events
from fedeval.release import Probe, Release, level_offsets

Payload = dict[str, Any]
"""One message's content: str → int, float, str, bytes or numpy array."""

KEYS, PROBE, REPORT, REVEAL = "keys", "probe", "report", "reveal"
STEPS = (KEYS, PROBE, REPORT, REVEAL)
ROUND_ID_BYTES = 16


# --------------------------------------------------------------------------------------------
# The public parameters of one run


@dataclass(frozen=True)
class Job:
    """What every client of one protocol run is told: the configuration (before a two-phase
    probe, its placeholder height), the score axis the leaves cut (public: it depends on the
    options alone), the resolution data are read at, the positive label, and for a
    reproducible simulation its seed (then the release says it is not private)."""

    config: PrivacyConfig
    axis: ScoreAxis
    resolution: int
    pos_label: str | None = None
    seed: int | None = None
    masked: bool = True  # False only to measure what the masks cost: reports travel bare

    def to_text(self) -> str:
        return json.dumps(
            {
                "config": config_dict(self.config),
                "probe_share": self.config.probe_share,
                "axis": self.axis.to_dict(),
                "resolution": self.resolution,
                "pos_label": self.pos_label,
                "seed": self.seed,
                "masked": self.masked,
            },
            sort_keys=True,
        )

    @classmethod
    def from_text(cls, text: str) -> Job:
        d = json.loads(text)
        cfg = config_from_dict(d["config"] | {"probe_share": d["probe_share"]})
        return cls(
            cfg,
            ScoreAxis.from_dict(d["axis"]),
            int(d["resolution"]),
            d["pos_label"],
            None if d["seed"] is None else int(d["seed"]),
            bool(d.get("masked", True)),
        )


# --------------------------------------------------------------------------------------------
# The client


@dataclass(frozen=True)
class ClientData:
    """Where a client's own rows are (its node config): a Parquet/CSV file and its columns."""

    path: str
    score_col: str = "score"
    label_col: str = "label"


def _generator(secret: bytes, *purpose: int) -> np.random.Generator:
    """A generator for one purpose of this client, from its private 128-bit secret: the same
    purpose gives the same draws in every message of a run (the cap, the probe's slots), a
    new round gives fresh noise."""
    entropy = int.from_bytes(secret, "little")
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=purpose))


def client_secret(job: Job, index: int) -> bytes:
    """The client's private randomness for the run: 16 bytes of the OS CSPRNG, or under a
    reproducible simulation (`job.seed`) derived from the seed and the client's index."""
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
    from cryptography.hazmat.primitives import serialization

    key = X25519PrivateKey.generate()
    raw = serialization.Encoding.Raw
    private = key.private_bytes(raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return private, key.public_key().public_bytes(raw, serialization.PublicFormat.Raw)


def _pair_key(private: bytes, peer_public: bytes, first: int, second: int, round_id: bytes):
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


def _probe_roles(rows: ClientRows, config: PrivacyConfig, secret: bytes):
    """Which slots are probe reports (drawn from the client's secret, the same in both rounds),
    which real examples they use, and how many slots they take."""
    labels, real = _localdp_slots(rows, config)
    role = probe.roles(len(labels), config, _generator(secret, 1))
    return labels, real, role


def client_step(
    request: Payload,
    state: dict[str, bytes],
    data: ClientData,
    *,
    allow_unmasked: bool = False,
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
    masked_model = job.config.model is not PrivacyModel.LOCALDP
    if masked_model and step != REVEAL and (not job.masked or k < 1) and not allow_unmasked:
        # A report without masks would show the server this client's data (federated) or its
        # noise share (distdp): only a measurement set up on the client's side may ask for it.
        raise UsageError("the server asked for a report without secure-aggregation masks")
    secret = state.get("secret")
    if secret is None:
        secret = state["secret"] = client_secret(job, index)
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
            bits = probe.client_bits_localdp(labels[role], real[role], config, noise)
            return {"bits": bits.astype(np.uint8), "slots": len(labels)}
        counts = np.bincount(rows.positive.astype(np.int64), minlength=2)[:2]
        alpha = mechanism_of(config).probe_alpha
        assert alpha is not None
        at, value = polya_share_events(n, alpha, 2, noise)
        vector = (counts + dense(at, value, (2,))).astype(np.uint32)
        if k:
            if held is None:
                raise UsageError("a masked step for a round this client holds no key of")
            vector += client_masks(held, index, n, k, _publics(request), round_id, 2)
        return {"masked": vector}
    if step != REPORT:
        raise UsageError(f"unknown protocol step {step!r}")
    config = config_from_dict(json.loads(str(request["config"])))
    cells = cell_index(rows.unit_scores, config.height)
    if config.model is PrivacyModel.LOCALDP:
        return _local_report(rows, cells, config, job, secret, noise)
    one = np.zeros(len(cells), np.int64)
    reports, _ = mechanism_for(config.model).client_reports(
        cells, rows.positive, one, 1, config, n, noise
    )
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


# --------------------------------------------------------------------------------------------
# The server

Send = Callable[[dict[int, Payload]], Iterable[tuple[int, Payload]]]
"""The transport: a payload for each node (by node id) out; the replies of the nodes that
answered in time and without an error back, as (node, payload) pairs as they arrive (so the
server sums reports one at a time and never holds them all)."""


@dataclass
class Traffic:
    """What the server received: messages and their payload bytes, per step."""

    messages: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)

    def add(self, step: str, reply: Payload) -> None:
        self.messages[step] = self.messages.get(step, 0) + 1
        self.bytes[step] = self.bytes.get(step, 0) + payload_bytes(reply)

    def per_message(self, step: str) -> float:
        """Mean payload bytes of one client's reply at `step` (0 if none)."""
        m = self.messages.get(step, 0)
        return self.bytes.get(step, 0) / m if m else 0.0


def payload_bytes(payload: Payload) -> int:
    """Bytes a payload carries (array data, strings, bytes; 8 per number)."""
    total = 0
    for v in payload.values():
        if isinstance(v, np.ndarray):
            total += v.nbytes
        elif isinstance(v, str | bytes):
            total += len(v)
        else:
            total += 8
    return total


@dataclass(frozen=True)
class Outcome:
    """A protocol run's result: the release, the axis its leaves cut, and what happened."""

    release: Release
    axis: ScoreAxis
    clients: int  # nodes asked to take part
    reported: int  # clients whose reports are in the sum
    recovered: int  # lost clients whose masks were removed with revealed keys
    rounds: int  # report rounds run (1 + re-runs)
    traffic: Traffic


class ProtocolError(InputError):
    """A run that cannot finish within its rules (too few clients, too many re-runs)."""


@dataclass
class ServerProtocol:
    """The server's side of one protocol run over `nodes` (Flower node ids)."""

    job: Job
    send: Send
    min_cohort: int = MIN_COHORT
    neighbours: int | None = None
    retries: int = 2
    traffic: Traffic = field(default_factory=Traffic)
    attempts: int = 0  # data rounds asked so far (each client draws fresh noise per round)
    run_id: bytes = field(default_factory=lambda: os.urandom(ROUND_ID_BYTES))
    _keyring: tuple[dict[int, bytes], bytes] | None = field(default=None, repr=False)

    def _check_cohort(self, cohort: list[int], when: str) -> None:
        self._check_count(len(cohort), when)

    def _check_count(self, count: int, when: str) -> None:
        if count < max(self.min_cohort, ABSOLUTE_MIN_COHORT):
            raise ProtocolError(
                f"{count} clients answered {when}: a cohort needs at least "
                f"{self.min_cohort} (the server learns its sum). Nothing was released."
            )

    def _stream(self, step: str, payloads: dict[int, Payload]) -> Iterator[tuple[int, Payload]]:
        """The replies to `payloads` as they arrive, one per node asked (a repeat or a reply
        from a node not asked is ignored)."""
        tag: Payload = {"run": self.run_id}
        if step in (PROBE, REPORT):
            self.attempts += 1
            tag["attempt"] = self.attempts
        payloads = {node: p | tag for node, p in payloads.items()}
        seen: set[int] = set()
        for node, reply in self.send(payloads):
            if node in payloads and node not in seen:
                seen.add(node)
                self.traffic.add(step, reply)
                yield node, reply

    def _exchange(self, step: str, payloads: dict[int, Payload]) -> dict[int, Payload]:
        return dict(self._stream(step, payloads))

    def _keys(self, cohort: list[int]) -> tuple[list[int], dict[int, bytes], bytes]:
        """The cohort's public keys: those of the run's key round when every node of the cohort
        took part in it (a round's masks are bound to its own round id by HKDF, so pair keys of
        different rounds are independent, revealed ones included), else a round of fresh key
        pairs. Returns the nodes with a key (sorted), their public keys and the key round."""
        if self._keyring is not None:
            publics, key_round = self._keyring
            if all(node in publics for node in cohort):
                return sorted(cohort), {node: publics[node] for node in cohort}, key_round
        round_id = os.urandom(ROUND_ID_BYTES)
        replies = self._exchange(KEYS, {node: {"step": KEYS, "round": round_id} for node in cohort})
        publics = {}
        for node, r in replies.items():
            key = np.asarray(r.get("public"), np.uint8)
            if key.shape == (secagg.KEY_BYTES,):
                publics[node] = key.tobytes()
        self._keyring = (publics, round_id)
        return sorted(publics), publics, round_id

    def _masked_payloads(
        self, step: str, roster: list[int], publics: dict[int, bytes], round_id: bytes, extra
    ) -> tuple[dict[int, Payload], int]:
        n = len(roster)
        k = secagg.neighbours_per_side(n, self.neighbours) if self.job.masked else 0
        text = self.job.to_text()
        out = {}
        for i, node in enumerate(roster):
            succ, pred = neighbour_indices(i, n, k)
            idx = np.concatenate([succ, pred])
            keys = np.zeros((len(idx), secagg.KEY_BYTES), np.uint8)
            for j, peer in enumerate(idx):
                keys[j] = np.frombuffer(publics[roster[peer]], np.uint8)
            out[node] = {
                "step": step,
                "round": round_id,
                "job": text,
                "index": i,
                "n": n,
                "k": k,
                "neighbours": idx.astype(np.int64),
                "publics": keys,
            } | extra
        return out, k

    def _masked_sum(
        self, step: str, cohort: list[int], length: int, extra: Payload
    ) -> tuple[np.ndarray, list[int], int] | list[int]:
        """One masked round over `cohort`: (the unmasked sum as int64, the roster whose
        reports it holds, clients recovered), or the nodes still answering when the round
        must be re-run."""
        if self.job.masked:
            roster, publics, key_round = self._keys(cohort)
        else:  # a measurement of the masks' cost: no key round, bare reports
            roster, publics, key_round = sorted(cohort), {}, b""
        self._check_cohort(roster, "the key round")
        round_id = os.urandom(ROUND_ID_BYTES)  # this round's masks are bound to it
        extra = extra | {"keyring": key_round}
        payloads, k = self._masked_payloads(step, roster, publics, round_id, extra)
        n = len(roster)
        where = {node: i for i, node in enumerate(roster)}
        seen = np.zeros(n, bool)
        total = np.zeros(length, np.uint32)
        for node, reply in self._stream(step, payloads):
            v = reply.get("masked")
            if isinstance(v, np.ndarray) and v.dtype == np.uint32 and v.shape == (length,):
                total += v
                seen[where[node]] = True
        if seen.all():
            return unmasked(total), roster, 0
        survivors = [roster[i] for i in np.flatnonzero(seen)]
        if self.job.config.model is not PrivacyModel.FEDERATED:
            return survivors  # distdp: the lost shares cannot be made up; re-run
        missing = np.flatnonzero(~seen)
        if len(secagg.exposed_survivors(missing, n, k)):
            return survivors
        first, second = secagg.broken_pairs(missing, n, k)
        asks: dict[int, list[int]] = {}
        for j, (a, b) in enumerate(zip(first, second, strict=True)):
            asks.setdefault(int(a) if seen[a] else int(b), []).append(j)
        reveal = {}
        for i, js in asks.items():
            other = [int(second[j]) if first[j] == i else int(first[j]) for j in js]
            reveal[roster[i]] = {
                "step": REVEAL,
                "round": round_id,
                "keyring": key_round,
                "job": self.job.to_text(),
                "index": i,
                "n": n,
                "k": k,
                "pairs": np.stack([first[js], second[js]], axis=1).astype(np.int64),
                "publics": np.stack([np.frombuffer(publics[roster[o]], np.uint8) for o in other]),
            }
        answers = self._exchange(REVEAL, reveal)
        keys = np.zeros((len(first), secagg.KEY_BYTES), np.uint8)
        for i, js in asks.items():
            got = np.asarray(answers.get(roster[i], {}).get("keys", np.zeros(0)), np.uint8)
            if got.shape != (len(js), secagg.KEY_BYTES):
                return [node for node in survivors if node in answers]
            keys[js] = got
        total += secagg.recovery_correction(first, second, keys, ~seen, length)
        return unmasked(total), survivors, len(missing)

    def run(self, nodes: list[int]) -> Outcome:
        """Run the protocol over `nodes` and return the release (ProtocolError when it cannot
        finish within `min_cohort` and `retries`)."""
        config = self.job.config
        cohort = sorted(set(nodes))
        self._check_cohort(cohort, "the call")
        asked = len(cohort)
        found: Probe | None = None
        total_slots = 0
        floor = self.job.axis.auto_floor(self.job.resolution)
        rounds = 0
        if config.probed:
            for _ in range(self.retries + 1):
                if config.model is PrivacyModel.LOCALDP:
                    found, total_slots, cohort = self._local_probe(cohort)
                    break
                got = self._masked_sum(PROBE, cohort, 2, {})
                if isinstance(got, tuple):
                    counts, cohort, _ = got
                    found = Probe(counts)
                    break
                cohort = got
            else:
                raise ProtocolError(
                    f"clients kept dropping out of the probe round ({self.retries} re-runs); "
                    "nothing was released."
                )
            assert found is not None
            h = probe.height(found, config, total_slots, floor, self.job.resolution)
            config = replace(config, height=h)
        extra = {"config": json.dumps(config_dict(config) | {"probe_share": config.probe_share})}
        width = int(level_offsets(config)[-1])
        for _ in range(self.retries + 1):
            rounds += 1
            if config.model is PrivacyModel.LOCALDP:
                release, reported = self._local_reports(cohort, config, extra, found)
                recovered = 0
                break
            got = self._masked_sum(REPORT, cohort, width, extra)
            if isinstance(got, tuple):
                counts, roster, recovered = got
                reported = len(roster)
                release = Release.of_cohort(config, counts, None, reported, found)
                break
            cohort = got
        else:
            raise ProtocolError(
                f"clients kept dropping out of the report round ({self.retries} re-runs); "
                "nothing was released."
            )
        if self.job.seed is not None:
            release = replace(release, seeded=True)
        return Outcome(release, self.job.axis, asked, reported, recovered, rounds, self.traffic)

    def _local_probe(self, cohort: list[int]) -> tuple[Probe, int, list[int]]:
        """Localdp round 1: bare probe reports (each already ε-LDP) and every client's number
        of report slots (public under localdp)."""
        round_id = os.urandom(ROUND_ID_BYTES)
        text = self.job.to_text()
        n = len(cohort)
        replies = self._exchange(
            PROBE,
            {
                node: {"step": PROBE, "round": round_id, "job": text, "index": i, "n": n, "k": 0}
                for i, node in enumerate(cohort)
            },
        )
        counts = np.zeros(2, np.int64)
        reports = slots = 0
        kept = []
        cap = self.job.config.max_examples
        for node in cohort:
            r = replies.get(node)
            if r is None:
                continue
            bits = np.asarray(r.get("bits"))
            s = int(r.get("slots", -1))
            if bits.ndim != 2 or bits.shape[1] != 2 or s < len(bits) or (cap and s != cap):
                continue
            counts += bits.astype(np.int64).sum(axis=0)
            reports += len(bits)
            slots += s
            kept.append(node)
        self._check_cohort(kept, "the probe round")
        return Probe(counts, reports), slots, kept

    def _local_reports(
        self, cohort: list[int], config: PrivacyConfig, extra: Payload, found: Probe | None
    ) -> tuple[Release, int]:
        """Localdp round 2: every client's OUE reports, checked and summed per level."""
        round_id = os.urandom(ROUND_ID_BYTES)
        text = self.job.to_text()
        n = len(cohort)
        payloads = {
            node: {"step": REPORT, "round": round_id, "job": text, "index": i, "n": n, "k": 0}
            | extra
            for i, node in enumerate(cohort)
        }
        off = level_offsets(config)
        counts = np.zeros(int(off[-1]), np.int64)
        reporters = np.zeros(len(config.levels), np.int64)
        reported = 0
        cap = config.max_examples if config.unit is Unit.CLIENT else None
        for _, r in self._stream(REPORT, payloads):
            sums, per_level = _local_sums(r, config)
            if sums is None or per_level is None:
                continue
            if cap is not None and (
                per_level.sum() > cap or (not config.probed and per_level.sum() != cap)
            ):
                continue
            counts += sums
            reporters += per_level
            reported += 1
        self._check_count(reported, "the report round")
        return Release.of_cohort(config, counts, reporters, reported, found), reported


def _local_sums(reply: Payload, config: PrivacyConfig):
    """One localdp reply's bit sums per node and reports per level, or (None, None) if it is
    not a well-formed set of reports for `config`."""
    per_level = np.asarray(reply.get("levels", np.zeros(0)), np.int64)
    if per_level.shape != (len(config.levels),) or np.any(per_level < 0):
        return None, None
    parts = []
    for i, k in enumerate(config.levels):
        width = 2 << k
        packed = np.asarray(reply.get(f"bits-{i}", np.zeros((0, 0))), np.uint8)
        if packed.ndim != 2 or packed.shape != (per_level[i], (width + 7) // 8):
            return None, None
        bits = np.unpackbits(packed, axis=1, count=width)
        parts.append(bits.sum(axis=0, dtype=np.int64))
    return np.concatenate(parts), per_level


def client_data_from(node_config: Mapping[str, Any]) -> ClientData:
    """A client's data location from its node config (`data-path`, optional `score-col`,
    `label-col`)."""
    path = node_config.get("data-path")
    if not path:
        raise UsageError(
            "this node has no `data-path` in its node config: start it with "
            "`flower-supernode --node-config \"data-path='rows.parquet'\" ...`."
        )
    return ClientData(
        str(path),
        str(node_config.get("score-col", "score")),
        str(node_config.get("label-col", "label")),
    )
