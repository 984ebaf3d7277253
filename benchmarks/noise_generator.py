"""What a cryptographic generator costs the private path: numpy's PCG64 against AES-128-CTR
(randomgen's AESCounter, hardware AES where the CPU has it) as the bit generator of the noise.

Unseeded runs draw every noise share, OUE bit and resample from one `numpy.random.Generator`
(`fedeval.protocol.simulate.rng_and_seed`). PCG64 is a statistical generator: from enough of
its raw outputs its state can be recovered and every later draw predicted. AES-CTR under a key from
the OS is a cryptographic one: its outputs cannot be told from random bits without the key.
This times both, as the same Generator methods fedeval calls, on:

- the samplers alone: the fast path's discrete Laplace (10^7 draws), every client's Pólya share
  as sparse events (`polya_share_events`, 200,000 clients × 1,021 nodes at α = 0.873), the
  sparse OUE reports of 10^6 examples at 2^9 bits (ε = 5);
- whole runs through the library on the sample data (200,000 rows): `evaluate` under distdp
  (fast path, 200 interval draws), `evaluate --per-client` under distdp and under localdp.

    .venv/bin/python benchmarks/noise_generator.py            # a few seconds
    .venv/bin/python benchmarks/noise_generator.py --repeats 3

Times are the best of `--repeats` runs; the table goes to stdout.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
from common import SAMPLE

from fedeval.privacy import noise


def _generators() -> dict[str, Callable[[], np.random.Generator]]:
    from randomgen import AESCounter

    return {
        "PCG64": lambda: np.random.Generator(np.random.PCG64(np.random.SeedSequence())),
        "AES-CTR": lambda: np.random.Generator(AESCounter(np.random.SeedSequence())),
    }


def _best(fn: Callable[[], object], repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _run(rng_of: Callable[[], np.random.Generator], what: str) -> None:
    import fedeval
    from fedeval.protocol import simulate

    real = simulate.rng_and_seed
    drawn = []

    def with_generator(seed):
        if seed is None:
            drawn.append(True)
            return rng_of(), None
        return real(seed)

    simulate.rng_and_seed = with_generator
    try:
        if what == "evaluate distdp (fast)":
            fedeval.evaluate_file(SAMPLE, model="distdp", exact=False, ci_draws=200)
        elif what == "evaluate distdp --per-client":
            fedeval.evaluate_file(SAMPLE, model="distdp", exact=False, path="per-client")
        else:
            fedeval.evaluate_file(SAMPLE, model="localdp", exact=False, path="per-client")
    finally:
        simulate.rng_and_seed = real
    if not drawn:  # the run took its generator elsewhere: the comparison would time PCG64 twice
        raise RuntimeError(f"{what}: the run did not draw from the generator under test")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    gens = _generators()
    cases: dict[str, Callable[[np.random.Generator], object]] = {
        "discrete Laplace, 10^7 draws": lambda g: noise.discrete_laplace(0.789, 10_000_000, g),
        "Pólya share events, 200k × 1,021": lambda g: noise.polya_share_events(
            200_000, 0.873, 200_000 * 1021, g
        ),
        "OUE sparse, 10^6 × 512 bits": lambda g: noise.oue_sparse(
            g.integers(0, 512, 1_000_000), 512, 5.0, g, None
        ),
    }
    print(f"{'case':<36} {'PCG64 s':>9} {'AES-CTR s':>10} {'ratio':>6}")
    for name, fn in cases.items():
        t = {k: _best(lambda mk=mk, fn=fn: fn(mk()), args.repeats) for k, mk in gens.items()}
        print(f"{name:<36} {t['PCG64']:>9.3f} {t['AES-CTR']:>10.3f} "
              f"{t['AES-CTR'] / t['PCG64']:>6.2f}")  # fmt: skip
    for what in (
        "evaluate distdp (fast)",
        "evaluate distdp --per-client",
        "evaluate localdp --per-client",
    ):
        _run(gens["PCG64"], what)  # untimed: the first run reads the file and imports the path
        t = {
            k: _best(lambda mk=mk, what=what: _run(mk, what), args.repeats)
            for k, mk in gens.items()
        }
        print(f"{what:<36} {t['PCG64']:>9.3f} {t['AES-CTR']:>10.3f} "
              f"{t['AES-CTR'] / t['PCG64']:>6.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
