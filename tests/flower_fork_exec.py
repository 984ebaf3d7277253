"""A SuperExec that forks: one warm process runs the ClientApp and ServerApp tasks of a Flower
deployment on one machine (`tests/test_flower_engine.py`; SuperLink and SuperNodes started with
`--isolation process`, Flower's mode in which someone else runs the app processes).

In Flower's default `--isolation subprocess`, the SuperLink and every SuperNode start a
`flower-superexec` of their own, and it starts a fresh `flwr-clientapp` (or `flwr-serverapp`)
process per task: every message to every node imports Flower and fedeval again, about 4 CPU-s
each (Flower 1.42: sqlalchemy, alembic, fastapi), so a 3-node run of two rounds started 10
processes that did little but import. This process imports them once, asks each Runtime API
for tasks the way `flower-superexec` does (Flower's `AcquireTask`), and runs each task in a
forked child through the entry points `flwr-clientapp` and `flwr-serverapp` call
(`run_clientapp`, `run_serverapp`): each task is still a process of its own, which pulls its
message and context from the SuperNode (or SuperLink) over the Runtime API, loads the app named
in the FAB and pushes its reply and context back. This process runs no task itself, so a task
inherits nothing of an earlier one: what a client keeps between messages (its key of the key
round) travels in Flower's context, as it must across `flwr-clientapp` processes.

    python tests/flower_fork_exec.py --parent-pid PID [--interval S] [--ready FILE] ADDRESS...

ADDRESS: a Runtime API (`host:port`, the `--port` of `flower-superlink` or `flower-supernode`),
plain HTTP (`--insecure`). It exits when the process `--parent-pid` is gone, or on SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _run_task(kind: str, address: str, token: str) -> int:
    """Run one task in this (forked) process; its exit code."""
    from queue import Queue

    from flwr.supercore.constant import TaskType
    from flwr.supercore.logger import mirror_output_to_queue, restore_output
    from flwr.superlink.runtime import run_serverapp
    from flwr.supernode.runtime.run_clientapp import run_clientapp

    try:
        if kind == TaskType.SERVER_APP:
            log_queue: Queue[str | None] = Queue()  # streamed to `flwr run --stream`
            mirror_output_to_queue(log_queue)
            run_serverapp(
                runtime_api_address=address,
                log_queue=log_queue,
                token=token,
                insecure=True,
                certificates=None,
                parent_pid=None,
                runtime_dependency_install=False,
            )
            restore_output()
        else:
            run_clientapp(
                runtime_api_address=address,
                token=token,
                insecure=True,
                certificates=None,
                parent_pid=None,
                runtime_dependency_install=False,
            )
    except SystemExit as e:  # Flower's entry points end with sys.exit
        return e.code if isinstance(e.code, int) else 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between polls")
    parser.add_argument("--ready", help="a file written once everything is imported")
    parser.add_argument("addresses", nargs="+")
    args = parser.parse_args(argv)

    # Everything a task imports, imported once here (a forked child inherits it).
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.constant import TaskType
    from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.superlink.runtime import run_serverapp  # noqa: F401
    from flwr.supernode.runtime.run_clientapp import run_clientapp  # noqa: F401

    import fedeval.flower.client_app
    import fedeval.flower.server_app  # noqa: F401

    kinds = [TaskType.CLIENT_APP, TaskType.SERVER_APP]
    clients = [
        RuntimeHttpClient.from_server_address(
            server_address=a,
            insecure=True,
            root_certificates=None,
            interceptors=[RuntimeVersionHttpInterceptor(component_name="SuperExec")],
        )
        for a in args.addresses
    ]
    if args.ready:
        with open(args.ready, "w") as f:
            f.write(f"{os.getpid()}\n")
    children: set[int] = set()
    while True:
        try:
            os.kill(args.parent_pid, 0)
        except ProcessLookupError:
            break
        for address, client in zip(args.addresses, clients, strict=True):
            try:
                res = client.AcquireTask(AcquireTaskRequest(supported_task_types=kinds))
            except Exception:  # not listening yet, or gone: asked again at the next poll
                continue
            if not (res.HasField("task") and res.token):
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()  # this process runs no thread: the child holds no lock of one
            if pid == 0:  # the task's own process
                code = 1
                try:
                    code = _run_task(res.task.type, address, res.token)
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            children.add(pid)
        for pid in list(children):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
