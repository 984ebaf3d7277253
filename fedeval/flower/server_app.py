"""The ServerApp: runs the protocol's rounds over the connected SuperNodes and writes the release.

Settings come from the run config (`fedeval.flower.settings.RunSettings.from_run_config`; a
project's ``[tool.flwr.app.config]``, or ``flwr run --run-config``), plus what only the server
needs: ``release-path`` (where the sealed release is written, in the schema
``fedeval aggregate`` writes; ``fedeval evaluate --from`` reads it), ``sign-key`` (an Ed25519
private key from ``fedeval keygen``, to sign it), ``min-nodes`` (how many SuperNodes to wait
for, default the minimum cohort) and ``wait-nodes`` (for at most this many seconds).

Replies are pulled as they arrive and summed one at a time (`fedeval.flower.server`), so the
server holds one report, not all of them; a node silent for ``reply-timeout`` seconds, or that
answers with an error, has dropped out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp

from fedeval.core.errors import UsageError
from fedeval.documents.release_file import save_release
from fedeval.documents.seals import load_private_key
from fedeval.flower.job import Payload
from fedeval.flower.records import from_record, to_record
from fedeval.flower.server import Outcome, ServerProtocol
from fedeval.flower.settings import DEFAULT_WAIT_NODES, MESSAGE_TYPE, RunSettings

log = logging.getLogger("fedeval.flower")
PULL_INTERVAL = 0.02


def grid_send(
    grid: Grid, timeout: float
) -> Callable[[dict[int, Payload]], Iterator[tuple[int, Payload]]]:
    """The protocol's transport over a Flower Grid: push one message per node, then pull the
    replies as they arrive until all are in or `timeout` seconds pass. Error replies are
    dropouts."""

    def send(payloads: dict[int, Payload]) -> Iterator[tuple[int, Payload]]:
        messages = [
            Message(to_record(p), dst_node_id=node, message_type=MESSAGE_TYPE)
            for node, p in payloads.items()
        ]
        pending = {i for i in grid.push_messages(messages) if i}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            replies = list(grid.pull_messages(pending))
            for m in replies:
                pending.discard(m.metadata.reply_to_message_id)
                if m.has_error():
                    continue
                yield m.metadata.src_node_id, from_record(m.content)
            if pending and not replies:
                time.sleep(PULL_INTERVAL)

    return send


def wait_for_nodes(grid: Grid, count: int, seconds: float) -> list[int]:
    """The connected nodes once at least `count` are there (UsageError after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= count:
            return nodes
        if time.monotonic() > deadline:
            raise UsageError(
                f"{len(nodes)} SuperNodes connected within {seconds:g} s; the run needs "
                f"{count}. Start more with `flower-supernode`, or lower `min-nodes`."
            )
        time.sleep(0.2)


def serve(
    grid: Grid, settings: RunSettings, *, min_nodes: int | None = None, wait: float = 120.0
) -> Outcome:
    """One protocol run over the nodes connected to `grid`."""
    nodes = wait_for_nodes(grid, min_nodes or settings.min_cohort, wait)
    protocol = ServerProtocol(
        settings.job(),
        grid_send(grid, settings.reply_timeout),
        min_cohort=settings.min_cohort,
        neighbours=settings.neighbours,
        retries=settings.retries,
    )
    return protocol.run(nodes)


def make_server_app(
    settings: RunSettings | Sequence[RunSettings] | None = None,
    *,
    on_outcome: Callable[[Outcome], None] | None = None,
    min_nodes: int | None = None,
) -> ServerApp:
    """A ServerApp that runs the protocol with `settings` (default: from the run config; a
    sequence: one independent run after another, each with fresh keys, over the same nodes)
    and hands each outcome to `on_outcome`; without one, it writes the release to the run
    config's ``release-path``."""
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        cfg = context.run_config
        if settings is None:
            runs = [RunSettings.from_run_config(cfg)]
        else:
            runs = [settings] if isinstance(settings, RunSettings) else list(settings)
        need = min_nodes or int(cfg.get("min-nodes", 0) or 0) or None
        wait = float(cfg.get("wait-nodes", DEFAULT_WAIT_NODES) or DEFAULT_WAIT_NODES)
        for s in runs:
            outcome = serve(grid, s, min_nodes=need, wait=wait)
            if on_outcome is not None:
                on_outcome(outcome)
            else:
                path, key = str(cfg.get("release-path", "")), str(cfg.get("sign-key", ""))
                write_release(outcome, path, key)

    return server


def write_release(outcome: Outcome, path: str, sign_key: str = "") -> None:
    """Write the outcome's release, sealed (signed with the key file `sign_key`, if any)."""
    if not path:
        raise UsageError("set `release-path` in the run config: where to write the release.")
    key = load_private_key(Path(sign_key)) if sign_key else None
    save_release(path, outcome.release, outcome.axis, sign_key=key)
    log.info(
        "fedeval: %d of %d clients reported (%d recovered) -> %s",
        outcome.reported,
        outcome.clients,
        outcome.recovered,
        path,
    )


app = make_server_app()
