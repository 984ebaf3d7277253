"""The server's side of the protocol (`fedeval.flower.job`): the rounds, the sums, dropout
recovery, and the release. It only ever holds sums: each reply is added as it arrives, and the
release (`fedeval.core.release.Release.of_cohort`, which keeps only the exact counts the
mechanism may publish) is what it returns."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from fedeval.core.axis import ScoreAxis
from fedeval.core.config import PrivacyConfig, PrivacyModel, Unit, config_dict
from fedeval.core.errors import InputError
from fedeval.core.release import Probe, Release, level_offsets
from fedeval.flower.client import neighbour_indices
from fedeval.flower.job import KEYS, PROBE, REPORT, REVEAL, ROUND_ID_BYTES, Job, Payload
from fedeval.privacy import probe
from fedeval.privacy.mechanism import mechanism_of
from fedeval.privacy.registry import model_of
from fedeval.protocol import secagg
from fedeval.protocol.aggregate import unmasked
from fedeval.protocol.encode import ABSOLUTE_MIN_COHORT, MIN_COHORT

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
        self,
        step: str,
        roster: list[int],
        publics: dict[int, bytes],
        round_id: bytes,
        extra: Payload,
    ) -> tuple[dict[int, Payload], int]:
        n = len(roster)
        k = secagg.neighbours_per_side(n, self.neighbours) if self.job.masked else 0
        text = self.job.to_text()
        out: dict[int, Payload] = {}
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
        if model_of(self.job.config.model).TRAITS.adds_noise:
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
                width = 2 << probe.probe_level(config.model, self.job.resolution)
                got = self._masked_sum(PROBE, cohort, width, {})
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
                public = mechanism_of(config).clients_public
                release = Release.of_cohort(
                    config, counts, None, reported, found, clients_public=public
                )
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
        width = 2 << probe.probe_level(self.job.config.model, self.job.resolution)
        counts = np.zeros(width, np.int64)
        reports = slots = 0
        kept = []
        cap = self.job.config.max_examples
        for node in cohort:
            r = replies.get(node)
            if r is None:
                continue
            bits = np.asarray(r.get("bits"))
            s = int(r.get("slots", -1))
            if bits.ndim != 2 or bits.shape[1] != width or s < len(bits) or (cap and s != cap):
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
        public = mechanism_of(config).clients_public
        release = Release.of_cohort(
            config, counts, reporters, reported, found, clients_public=public
        )
        return release, reported


def _local_sums(
    reply: Payload, config: PrivacyConfig
) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
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
