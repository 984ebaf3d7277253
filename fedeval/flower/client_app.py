"""The ClientApp: a SuperNode's side of the protocol, on the node's own rows.

The node config says where the rows are: ``data-path`` (a Parquet or CSV file, or a
directory of them), and optionally ``score-col`` and ``label-col``. Every message of the run
(`fedeval.flower.settings.MESSAGE_TYPE`) is answered by `fedeval.flower.client.client_step`
with the encoder and masks of `fedeval encode`. The client's private key of each round and its
private randomness stay in the node's own state (`context.state`), never in a reply.

In a simulation (`fedeval.flower.simulation`) the nodes have no node config of their own:
`make_client_app(data_dir=...)` reads partition i's rows from ``{data_dir}/{i}.parquet``.

A client that cannot take part (unreadable rows, a malformed request) replies with a bare
error: its reason stays in the node's log, since an error message naming a row or a value
would tell the server something about the data. ``drop-at`` in the node config (a step name:
keys, probe, report or reveal) makes the node vanish at that step: a simulated dropout.
"""

from __future__ import annotations

import logging

from flwr.app import ConfigRecord, Context, Error, Message
from flwr.clientapp import ClientApp

from fedeval.flower.client import client_step
from fedeval.flower.job import ClientData, client_data_from
from fedeval.flower.records import from_record, to_record

STATE = "fedeval"
REFUSED = "the client did not take part in this step"
ERROR_CODE = 1  # Flower's code for an exception raised in a ClientApp

log = logging.getLogger("fedeval.flower")

PARTITION_ID = "partition-id"  # the node config key Flower's simulation sets


def make_client_app(
    *,
    data_dir: str | None = None,
    drop: dict[int, str] | None = None,
    allow_unmasked: bool = False,
) -> ClientApp:
    """The ClientApp. `data_dir` (simulation): partition i reads ``{data_dir}/{i}.parquet``
    when its node config names no ``data-path``; `drop` (simulation): partition → the step at
    which that node vanishes; `allow_unmasked` (a benchmark of the masks' cost only): answer a
    job that asks for bare reports, which a deployed client refuses."""
    client = ClientApp()

    @client.query("fedeval")
    def answer(message: Message, context: Context) -> Message:
        return answer_message(
            message, context, data_dir=data_dir, drop=drop or {}, allow_unmasked=allow_unmasked
        )

    return client


def _data(context: Context, data_dir: str | None) -> ClientData:
    if data_dir is not None and "data-path" not in context.node_config:
        return ClientData(f"{data_dir}/{int(context.node_config[PARTITION_ID])}.parquet")
    return client_data_from(context.node_config)


def answer_message(
    message: Message,
    context: Context,
    *,
    data_dir: str | None,
    drop: dict[int, str],
    allow_unmasked: bool = False,
) -> Message:
    """The reply to one protocol message: the client's payload, or a bare error."""
    try:
        request = from_record(message.content)
        step = str(request.get("step"))
        vanish = str(context.node_config.get("drop-at", ""))
        if PARTITION_ID in context.node_config:
            vanish = drop.get(int(context.node_config[PARTITION_ID]), vanish)
        if vanish == step:
            return _refuse(message)
        data = _data(context, data_dir)
        stored = context.state.config_records.get(STATE)
        state = {k: bytes(v) for k, v in (stored or {}).items()}  # type: ignore[arg-type]
        part = context.node_config.get(PARTITION_ID)
        identity = None if part is None else int(part)
        payload = client_step(
            request, state, data, allow_unmasked=allow_unmasked, identity=identity
        )
        context.state[STATE] = ConfigRecord(dict(state))
        return Message(to_record(payload), reply_to=message)
    except Exception as e:  # reported in the node's log, never to the server
        log.warning("fedeval client: %s", e)
        return _refuse(message)


def _refuse(message: Message) -> Message:
    return Message(Error(code=ERROR_CODE, reason=REFUSED), reply_to=message)


app = make_client_app()
