"""fedeval on Flower: the staged protocol between real clients, over Flower's messages.

`fedeval.flower.client_app` (a ClientApp) reads the node's own rows and answers the protocol's
messages with the same encoder and masks as `fedeval encode`; `fedeval.flower.server_app` (a
ServerApp) runs the rounds, recovers from dropouts and writes the release `fedeval aggregate`
writes, which `fedeval evaluate --from` reads. The protocol itself (`fedeval.flower.job`, `client`,
`server`) does not import Flower. Simulation with Flower's engine: `fedeval.flower.simulation` and
``fedeval flower simulate``; a project for SuperLink/SuperNodes: ``fedeval flower new``.

Needs the ``flower`` extra (``pip install 'fedeval[flower]'``); ``import fedeval`` never
imports Flower.
"""

from __future__ import annotations

from fedeval.core.errors import UsageError

INSTALL_HINT = "pip install 'fedeval[flower]'"


def require_flower() -> None:
    """Raise a `UsageError` saying how to install Flower when it is missing."""
    import importlib.util

    if importlib.util.find_spec("flwr") is None:
        raise UsageError(f"Flower is not installed; install the extra: {INSTALL_HINT}")
