"""A federation in this process: the real ClientApp answering real Flower messages, without an
engine. Each simulated node has a random 63-bit node id and its own `Context` (node config and
state), as a SuperNode has; messages are built, answered by `ClientApp.__call__` (what Flower's
engines call) and read back, in turn. For tests (many runs in seconds) and for measuring the
protocol's own cost apart from the engine's."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from flwr.app import DEFAULT_TTL, Context, Message, Metadata, RecordDict

from fedeval.flower.client_app import make_client_app
from fedeval.flower.protocol import Payload
from fedeval.flower.records import from_record, to_record
from fedeval.flower.settings import MESSAGE_TYPE


class InProcessFederation:
    """`clients` nodes; node i reads ``{directory}/{i}.parquet``; `drop`: node index → the step
    at which it vanishes."""

    def __init__(
        self, directory: str | Path, clients: int, *, drop: dict[int, str] | None = None
    ) -> None:
        self.app = make_client_app(data_dir=str(directory), drop=drop)
        self.node_ids = sorted({secrets.randbits(63) for _ in range(clients)})
        while len(self.node_ids) < clients:  # pragma: no cover - a 63-bit collision
            self.node_ids = sorted(set(self.node_ids) | {secrets.randbits(63)})
        order = secrets.SystemRandom().sample(range(clients), clients)
        self.contexts = {
            node: Context(
                run_id=1,
                node_id=node,
                node_config={"partition-id": i, "num-partitions": clients},
                state=RecordDict(),
                run_config={},
            )
            for node, i in zip(self.node_ids, order, strict=True)
        }

    def send(self, payloads: dict[int, Payload]) -> Iterator[tuple[int, Payload]]:
        for node, payload in payloads.items():
            # The metadata a SuperLink would give the message (Flower's public `Metadata`).
            meta = Metadata(
                run_id=1,
                message_id=uuid.uuid4().hex,
                src_node_id=0,
                dst_node_id=node,
                reply_to_message_id="",
                group_id="",
                created_at=time.time(),
                ttl=DEFAULT_TTL,
                message_type=MESSAGE_TYPE,
            )
            # Flower's typed constructors read the running task's identity, which only its
            # runtimes set; they build a delivered message from its metadata, as here.
            message = Message(content=to_record(payload), metadata=meta)  # type: ignore[call-overload]
            reply = self.app(message, self.contexts[node])
            if not reply.has_error():
                yield node, from_record(reply.content)
