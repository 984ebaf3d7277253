"""Secure aggregation by pairwise additive masks mod 2^32, over a sparse circulant graph.

Every client i of a cohort of n (its roster) shares a secret seed with each of its K successors
i+1, …, i+K and K predecessors (mod n). For each ordered pair (a, b = a+d), a adds the mask
PRG(s_ab) and b subtracts it, so every mask cancels in the cohort's sum while a single report is
uniform on Z_{2^32}^D to anyone who lacks its seeds (the server). K = ⌈log2 n⌉ per side, the
O(log n) neighbourhood of Bell et al. (CCS 2020) rather than all pairs (Bonawitz et al., CCS 2017).

Dropout: when clients of the cohort send no report, their surviving neighbours reveal the seeds
they shared with them and the server removes the masks that no longer cancel (the recovery step
of Bonawitz et al., without the double masking that protects a client whose report arrives after
its seeds were revealed: a late report must be discarded).

Simulation stand-in, stated in every manifest: in a deployment the pair seeds come from a key
agreement (e.g. Diffie-Hellman) and masks from a cryptographic PRG (AES-CTR, ChaCha20). Here the
seeds are a keyed hash of the pair under a round key only the clients hold, and the PRG is the
splitmix64 counter generator: statistically uniform, fast enough for millions of simulated
clients, but not a cryptographic primitive.
"""

from __future__ import annotations

import math

import numpy as np

MODULUS_BITS = 32
PRG_NAME = "splitmix64 counter generator (simulation stand-in for AES-CTR)"

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place on a uint64 array (a bijection with full avalanche)."""
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def neighbours_per_side(n: int, requested: int | None = None) -> int:
    """K: ⌈log2 n⌉ by default, at most n − 1 (then every other client is a neighbour)."""
    if n <= 1:
        return 0
    k = max(1, math.ceil(math.log2(n))) if requested is None else int(requested)
    return min(k, n - 1)


def round_key(rng: np.random.Generator) -> np.ndarray:
    """A fresh 128-bit round key (two uint64 words), known to the cohort's clients only."""
    return rng.integers(0, 1 << 64, size=2, dtype=np.uint64, endpoint=False)


def pair_seeds(key: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The secret seed of every ordered pair (first → second) of roster indices, uint64.

    Ordered: s(a, b) and s(b, a) differ, so with n = 2 the two directions do not cancel inside
    one client's own mask.
    """
    z = (first.astype(np.uint64) << np.uint64(32)) | second.astype(np.uint64)
    z ^= key[0]
    _mix(z)
    z ^= key[1]
    return _mix(z)


def prg(seeds: np.ndarray, length: int) -> np.ndarray:
    """The mask each seed expands to: (len(seeds), length) uint32, uniform on Z_{2^32}."""
    words = (length + 1) // 2
    with np.errstate(over="ignore"):
        counter = (np.arange(1, words + 1, dtype=np.uint64) * _GOLDEN)[None, :]
        z = seeds.astype(np.uint64)[:, None] + counter
    _mix(z)
    return z.view(np.uint32)[:, :length]


def cohort_masks(key: np.ndarray, first: int, stop: int, n: int, k: int, length: int) -> np.ndarray:
    """The total masks of roster clients first..stop−1, (stop − first, length) uint32:
    Σ_d PRG(s(i, i+d)) − PRG(s(i−d, i)) over d = 1..k, mod 2^32.

    Client i's predecessor mask at distance d is client i−d's successor mask, so each pass
    expands the successor seeds of clients first−d..stop−1 once and uses them twice.
    """
    nb = stop - first
    total = np.zeros((nb, length), np.uint32)
    for d in range(1, k + 1):  # K = O(log n) passes, each vectorised over the clients
        rows = np.arange(first - d, stop, dtype=np.int64) % n
        succ = prg(pair_seeds(key, rows, (rows + d) % n), length)
        total += succ[d:]
        total -= succ[:nb]
    return total


def broken_pairs(missing: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Ordered pairs (first, second) with exactly one end missing: their masks do not cancel.

    Sorted and unique; a missing client's surviving neighbours must reveal these seeds.
    """
    miss = np.zeros(n, bool)
    miss[missing] = True
    m = np.flatnonzero(miss)
    firsts, seconds = [], []
    for d in range(1, k + 1):
        for a in (m, (m - d) % n):  # pairs where the missing client is first, then second
            b = (a + d) % n
            keep = miss[a] != miss[b]
            firsts.append(a[keep])
            seconds.append(b[keep])
    if not firsts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pairs = np.unique(np.stack([np.concatenate(firsts), np.concatenate(seconds)], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def recovery_correction(
    first: np.ndarray, second: np.ndarray, seeds: np.ndarray, missing_mask: np.ndarray, length: int
) -> np.ndarray:
    """What to add to the survivors' sum to remove the masks that no longer cancel, uint32.

    A surviving first end added PRG(s); a surviving second end subtracted it.
    """
    out = np.zeros(length, np.uint32)
    if len(seeds) == 0:
        return out
    masks = prg(seeds, length)
    survivor_first = ~missing_mask[first]
    out -= masks[survivor_first].sum(axis=0, dtype=np.uint32)
    out += masks[~survivor_first].sum(axis=0, dtype=np.uint32)
    return out
