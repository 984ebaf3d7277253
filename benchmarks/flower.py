"""fedeval on Flower's simulation engine: time, server memory and message sizes.

    .venv/bin/python benchmarks/flower.py                      # 100 and 1000 clients, ≈ 6 min
    .venv/bin/python benchmarks/flower.py --clients 100 --models federated

For each number of simulated clients (the sample data's 200,000 rows split into that many
SuperNodes), model, and with or without secure-aggregation masks, one run of
`fedeval.flower.simulation.run_flower` in a fresh subprocess (Ray's start included), which
prints:

- wall: seconds from the call to the release (Ray start-up, every round, the sum);
- server MB: peak RSS of the process that runs the ServerApp (and Flower's simulation driver;
  the simulated clients run in Ray's worker processes);
- report B: payload bytes of one client's reply at the report step (the masked uint32 vector,
  4 bytes per released node; localdp: its packed OUE reports), key B: of its reply at the key
  step (an X25519 public key); msgs: client replies the server received.

Without masks ("off") the clients send their bare reports and there is no key round: that is
not private and only runs because the benchmark's clients are set up to allow it (a deployed
ClientApp refuses); it shows what secure aggregation costs. Requires the flower extra.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SAMPLE


def one(clients: int, model: str, masks: bool) -> dict:
    """One run in this process; the figures as a dict."""
    from fedeval.flower.settings import RunSettings
    from fedeval.flower.simulation import run_flower, split_table

    settings = RunSettings(model=model, masks=masks)
    with tempfile.TemporaryDirectory() as tmp:
        split = split_table(SAMPLE, tmp, clients=clients)
        start = time.perf_counter()
        (outcome,) = run_flower(settings, split)
        wall = time.perf_counter() - start
    t = outcome.traffic
    return {
        "clients": clients,
        "model": model,
        "masks": masks,
        "height": outcome.release.config.height,
        "wall": wall,
        "server_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "report_bytes": t.per_message("report"),
        "key_bytes": t.per_message("keys"),
        "messages": sum(t.messages.values()),
        "reported": outcome.reported,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--models", nargs="+", default=["federated", "distdp"])
    ap.add_argument("--one", nargs=3, metavar=("CLIENTS", "MODEL", "MASKS"), help="internal")
    args = ap.parse_args()
    if args.one:
        k, model, masks = args.one
        print(json.dumps(one(int(k), model, masks == "on")))
        return
    print(
        f"{'clients':>7} {'model':>9} {'masks':>5} {'h':>3} {'wall s':>7} {'server MB':>9} "
        f"{'report B':>9} {'key B':>5} {'msgs':>5}"
    )
    for k in args.clients:
        for model in args.models:
            for masks in ("on", "off"):
                out = subprocess.run(
                    [sys.executable, __file__, "--one", str(k), model, masks],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode != 0:
                    print(f"{k:>7} {model:>9} {masks:>5} failed: {out.stderr[-500:]}")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(
                    f"{k:>7} {model:>9} {masks:>5} {r['height']:>3} {r['wall']:>7.1f} "
                    f"{r['server_mb']:>9.0f} {r['report_bytes']:>9,.0f} {r['key_bytes']:>5.0f} "
                    f"{r['messages']:>5}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
