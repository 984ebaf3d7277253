"""Time of the secure-aggregation masks: the old splitmix64 stand-in against the AES-256-CTR PRG.

`fedeval.protocol.secagg.cohort_masks` over a cohort of 200,000 clients with K = ⌈log2 n⌉ = 18
neighbours
per side, in the batches `fedeval encode` uses (2^22 report entries per batch), for the report
lengths used in practice: D = 513 (federated, flat h = 8) and D = 1,021 (distdp, hierarchy
h = 8). Each client's mask needs K pair streams of D words (each pass expands the successor
keys once and uses them twice), so 200k clients expand 3.6M keys. "old" is a private copy of the
former splitmix64 counter generator and keyed-hash seeds (kept here for comparison only: it is
not cryptographic); "new" is the module as it is: AES-256 PRF pair keys under a CSPRNG round
key, one AES-256-CTR stream per key. Target: new ≤ 2 × old.

A second table (`--ciphers`) times the expansion alone per key, for the candidate stream
ciphers of the `cryptography` package, written into a preallocated buffer: with a fresh
`Cipher` per key, and re-keying one algorithm object and `Cipher` (what `secagg.prg` does, with
AES-256-CTR, the fastest re-keyed). The per-key cost is mostly the cipher context's set-up
(≈ 2–3 µs), not the keystream (≈ 0.5–1 µs for 2–4 KB).

    .venv/bin/python benchmarks/secagg.py                  # 200k clients, D = 513, 1021 (≈ 1 min)
    .venv/bin/python benchmarks/secagg.py --clients 20000  # quicker
    .venv/bin/python benchmarks/secagg.py --ciphers        # also the per-key cipher table
    .venv/bin/python benchmarks/secagg.py --check          # exit 1 if new > 2 × old

Times are the best of `--repeats` (default 1) full runs. The table goes to stdout.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedeval.protocol import secagg

MAX_CELLS = 1 << 22  # fedeval.protocol.encode.MAX_CELLS: report entries per batch
LENGTHS = (513, 1021)
RATIO_TARGET = 2.0

# The former simulation stand-in (splitmix64), for comparison only.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def _old_pair_seeds(key: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    z = (first.astype(np.uint64) << np.uint64(32)) | second.astype(np.uint64)
    z ^= key[0]
    _mix(z)
    z ^= key[1]
    return _mix(z)


def _old_prg(seeds: np.ndarray, length: int) -> np.ndarray:
    words = (length + 1) // 2
    with np.errstate(over="ignore"):
        counter = (np.arange(1, words + 1, dtype=np.uint64) * _GOLDEN)[None, :]
        z = seeds.astype(np.uint64)[:, None] + counter
    _mix(z)
    return z.view(np.uint32)[:, :length]


def _old_cohort_masks(key, first: int, stop: int, n: int, k: int, length: int) -> np.ndarray:
    nb = stop - first
    total = np.zeros((nb, length), np.uint32)
    for d in range(1, k + 1):
        rows = np.arange(first - d, stop, dtype=np.int64) % n
        succ = _old_prg(_old_pair_seeds(key, rows, (rows + d) % n), length)
        total += succ[d:]
        total -= succ[:nb]
    return total


def time_cohort(masks, key, n: int, k: int, length: int) -> float:
    """Wall time of every client's mask, batch by batch as encode computes them."""
    step = max(1, MAX_CELLS // length)
    t0 = time.perf_counter()
    for c0 in range(0, n, step):
        masks(key, c0, min(c0 + step, n), n, k, length)
    return time.perf_counter() - t0


def _per_key_us(make, key_bytes: int, length: int, m: int = 20_000) -> float:
    """µs per key to expand m keys into `length` words each with a fresh context per key."""
    raw = os.urandom(key_bytes * m)
    row = 4 * length
    zeros = bytes(row)
    out = np.zeros(m * length + 16, np.uint32)  # slack: some versions want a block past the data
    flat = memoryview(out).cast("B")
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(m):
            make(raw[i * key_bytes : (i + 1) * key_bytes]).update_into(zeros, flat[i * row :])
        best = min(best, time.perf_counter() - t0)
    return best / m * 1e6


def _rekeyed(algorithm, mode):
    """A maker that re-keys one algorithm object and `Cipher`, as `secagg.prg` does."""
    encryptor = Cipher(algorithm, mode).encryptor

    def make(key: bytes):
        algorithm.key = key
        return encryptor()

    return make


def cipher_table(lengths) -> None:
    nonce = bytes(16)
    ctr = modes.CTR(nonce)
    candidates = {
        "ChaCha20": (
            32,
            lambda k: Cipher(algorithms.ChaCha20(k, nonce), None).encryptor(),
            _rekeyed(algorithms.ChaCha20(bytes(32), nonce), None),
        ),
        "AES-128-CTR": (
            16,
            lambda k: Cipher(algorithms.AES128(k), ctr).encryptor(),
            _rekeyed(algorithms.AES128(bytes(16)), ctr),
        ),
        "AES-256-CTR": (
            32,
            lambda k: Cipher(algorithms.AES256(k), ctr).encryptor(),
            _rekeyed(algorithms.AES256(bytes(32)), ctr),
        ),
    }
    print()
    print("µs per key to expand 20,000 keys (a cipher context per key):")
    print(f"{'cipher':<13} {'length':>7} {'fresh':>8} {'re-keyed':>9}")
    for length in lengths:
        for name, (nbytes, fresh, rekeyed) in candidates.items():
            us_fresh = _per_key_us(fresh, nbytes, length)
            us_rekeyed = _per_key_us(rekeyed, nbytes, length)
            print(f"{name:<13} {length:>7} {us_fresh:>8.2f} {us_rekeyed:>9.2f}")
        keys = np.frombuffer(os.urandom(32 * 20_000), np.uint8).reshape(-1, 32)
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            secagg.prg(keys, length)
            best = min(best, time.perf_counter() - t0)
        print(f"{'secagg.prg':<13} {length:>7} {'':>8} {best / len(keys) * 1e6:>9.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200_000)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ciphers", action="store_true", help="also time each cipher per key")
    parser.add_argument("--check", action="store_true", help="exit 1 if a ratio exceeds 2")
    args = parser.parse_args(argv)

    n = args.clients
    k = secagg.neighbours_per_side(n)
    old_key = np.random.default_rng(0).integers(0, 1 << 64, size=2, dtype=np.uint64)
    new_key = secagg.round_key()
    print(f"secure-aggregation masks: {n:,} clients, K = {k} per side, {n * k:,} pair streams")
    print(f"new PRG: {secagg.PRG_NAME}")
    print()
    print(f"{'clients':>9} {'length':>7} {'old s':>8} {'new s':>8} {'ratio':>6} {'new µs/key':>11}")
    ratios = []
    for length in args.lengths:
        old = min(
            time_cohort(_old_cohort_masks, old_key, n, k, length) for _ in range(args.repeats)
        )
        new = min(
            time_cohort(secagg.cohort_masks, new_key, n, k, length) for _ in range(args.repeats)
        )
        ratios.append(new / old)
        per_key = new / (n * k) * 1e6
        print(f"{n:>9,} {length:>7} {old:>8.2f} {new:>8.2f} {new / old:>6.2f} {per_key:>11.2f}")
        sys.stdout.flush()
    ok = all(r <= RATIO_TARGET for r in ratios)
    print()
    print(f"new ≤ {RATIO_TARGET:g} × old at every length: {'yes' if ok else 'NO'}")
    if args.ciphers:
        cipher_table(args.lengths)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
