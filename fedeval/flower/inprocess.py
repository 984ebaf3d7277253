"""A federation in this process: the real ClientApp answering real Flower messages, without an
engine. Each simulated node has a random 63-bit node id and its own `Context` (node config and
state), as a SuperNode has; messages are built, answered by `ClientApp.__call__` (what Flower's
engines call) and read back, in turn. For tests (many runs in seconds) and for measuring the
protocol's own cost apart from the engine's."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from flwr.app import DEFAULT_TTL, Context, Message, Metadata, RecordDict

from fedeval.flower.client_app import make_client_app
from fedeval.flower.job import Payload
from fedeval.flower.records import from_record, to_record
from fedeval.flower.settings import MESSAGE_TYPE


class InProcessFederation:
    """`clients` nodes; the node of partition i reads ``{directory}/{i}.parquet`` (the
    partitions 0..clients−1, or those given); `drop`: partition → the step at which its node
    vanishes."""

    def __init__(
        self,
        directory: str | Path,
        clients: int,
        *,
        drop: dict[int, str] | None = None,
        partitions: Sequence[int] | None = None,
        allow_unmasked: bool = False,
    ) -> None:
        parts = list(range(clients)) if partitions is None else list(partitions)
        self.app = make_client_app(
            data_dir=str(directory), drop=drop, allow_unmasked=allow_unmasked
        )
        ids: set[int] = set()
        while len(ids) < len(parts):
            ids.add(secrets.randbits(63))
        self.node_ids = sorted(ids)
        nodes = secrets.SystemRandom().sample(self.node_ids, len(parts))
        self.partition = dict(zip(nodes, parts, strict=True))
        self.contexts = {
            node: Context(
                run_id=1,
                node_id=node,
                node_config={"partition-id": i, "num-partitions": len(parts)},
                state=RecordDict(),
                run_config={},
            )
            for node, i in self.partition.items()
        }

    def ask(self, node: int, payload: Payload) -> Message:
        """Node `node`'s ClientApp's reply to one message, as Flower would deliver it."""
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
        return self.app(message, self.contexts[node])

    def send(self, payloads: dict[int, Payload]) -> Iterator[tuple[int, Payload]]:
        """The protocol's transport: each node's reply in turn; an error reply is a dropout."""
        for node, payload in payloads.items():
            reply = self.ask(node, payload)
            if not reply.has_error():
                yield node, from_record(reply.content)
