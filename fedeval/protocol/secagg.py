"""Secure aggregation by pairwise additive masks mod 2^32, over a sparse circulant graph.

Every client i of a cohort of n (its roster) shares a 256-bit secret key with each of its K
successors i+1, …, i+K and K predecessors (mod n). For each ordered pair (a, b = a+d), a adds the
mask PRG(k_ab) and b subtracts it, so every mask cancels in the cohort's sum while a single
report is uniform on Z_{2^32}^D to anyone who lacks its keys (the server). K = ⌈log2 n⌉ per side,
the O(log n) neighbourhood of Bell et al. (CCS 2020) rather than all pairs (Bonawitz et al.,
CCS 2017).

What is cryptographic. The PRG (`prg`) is the AES-256-CTR keystream (NIST SP 800-38A, via the
`cryptography` package and OpenSSL, hardware AES where the CPU has it) of the pair key, from an
all-zero initial counter block: each key expands to exactly one stream, the mask of its pair in
one round, so a counter block is never used twice under one key. (ChaCha20 would be as sound;
AES-CTR measured faster here, see benchmarks/secagg.py.) Randomness comes from the OS CSPRNG
(`round_key` reads `os.urandom`); no mask ever depends on a user-supplied seed. In a
deployment, each pair key comes from key agreement (`agree_pair_key`): the X25519 shared secret
of the two clients' per-round key pairs, through HKDF-SHA256 bound to the ordered pair and the
round. The expansion (`prg`, as `cohort_masks` and `recovery_correction` use it) is the same
code in both.

Simulation stand-in, stated in every manifest. One process plays every client, so running n·K
X25519 exchanges would only cost time: instead, the pair keys are a PRF of one round key drawn
from the OS CSPRNG (`pair_keys`: AES-256 of the ordered pair index under the round key). The
round key stands in for the clients' private keys: the clients hold it, the server never sees
it. Everything downstream of the pair keys is the deployment's code.

Trust. The server is honest but curious: it follows the protocol (in particular it reports
dropouts truthfully) and learns only the masked reports and, on dropout, the revealed keys of
broken pairs. A client's report stays hidden unless all 2K of its neighbours collude with the
server (or, in simulation, the server learns the round key); equally, a surviving client whose
2K neighbours all dropped out would have every key revealed, so a recovery that would reveal all
of a survivor's keys must be refused (`exposed_survivors`). A single report's secrecy rests on
its 2K masks, not on the cohort's size; what protects the released *sum* is the DP noise.

Dropout: when clients of the cohort send no report, their surviving neighbours reveal the keys
they shared with them and the server removes the masks that no longer cancel (the recovery step
of Bonawitz et al.). There is no double masking (no self-mask secret-shared among the cohort),
so a client whose report arrives after its keys were revealed would be unmasked: a late report
must be discarded, never added.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MODULUS_BITS = 32
KEY_BYTES = 32
PRG_NAME = (
    "AES-256-CTR keystream of each 256-bit pair key (zero initial counter block), read as "
    "little-endian uint32 words; pair keys in simulation: AES-256 PRF of the ordered pair under "
    "a round key from the OS CSPRNG (deployment: X25519 + HKDF-SHA256)"
)

_NONCE = bytes(16)  # CTR's initial counter block, all zero: each key makes a single stream
_PAIR_DOMAIN = 0x66656473  # "feds": separates pair-key blocks from any other use of a round key
_AGREE_INFO = b"fedeval secagg pair key v1"


def neighbours_per_side(n: int, requested: int | None = None) -> int:
    """K: ⌈log2 n⌉ by default, at most n − 1 (then every other client is a neighbour)."""
    if n <= 1:
        return 0
    k = max(1, math.ceil(math.log2(n))) if requested is None else int(requested)
    return min(k, n - 1)


def round_key() -> bytes:
    """A fresh 256-bit round key from the OS CSPRNG, held by the cohort's clients only.

    In simulation it stands in for the clients' private keys (see `pair_keys`)."""
    return os.urandom(KEY_BYTES)


def _check_key(key: bytes) -> bytes:
    key = bytes(key)
    if len(key) != KEY_BYTES:
        raise ValueError(f"a round key has {KEY_BYTES} bytes; got {len(key)}")
    return key


def pair_keys(round_key: bytes, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The 256-bit secret of every ordered pair (first → second) of roster indices: (m, 32) uint8.

    Simulation only: k_ab = AES-256_R(a ‖ b ‖ 0 ‖ tag) ‖ AES-256_R(a ‖ b ‖ 1 ‖ tag) under the round
    key R (indices as little-endian uint32), a PRF of the pair computed in one cipher call for the
    whole batch. Ordered: AES is a permutation, so k(a, b) ≠ k(b, a) for a ≠ b, and with n = 2
    the two directions do not cancel inside one client's own mask. A deployment derives each key
    with `agree_pair_key` instead; both feed the same `prg`.
    """
    key = _check_key(round_key)
    first = np.asarray(first, np.int64).ravel()
    second = np.asarray(second, np.int64).ravel()
    if first.shape != second.shape:
        raise ValueError("first and second must have the same length")
    m = len(first)
    if m and (min(first.min(), second.min()) < 0 or max(first.max(), second.max()) >> 32):
        raise ValueError("roster indices must lie in [0, 2^32)")
    blocks = np.empty((m, 2, 4), "<u4")
    blocks[:, :, 0] = first[:, None]
    blocks[:, :, 1] = second[:, None]
    blocks[:, :, 2] = (0, 1)
    blocks[:, :, 3] = _PAIR_DOMAIN
    out = np.empty((m, KEY_BYTES), np.uint8)
    if m:
        enc = Cipher(algorithms.AES256(key), modes.ECB()).encryptor()
        out.reshape(-1)[:] = np.frombuffer(enc.update(blocks.tobytes()), np.uint8)
    return out


def agree_pair_key(
    own_private: X25519PrivateKey,
    peer_public: X25519PublicKey,
    first: int,
    second: int,
    round_id: bytes,
) -> bytes:
    """The deployment's pair key of the ordered pair (first → second) in round `round_id`.

    Both ends call it with the same (first, second): client `first` with its private key and
    `second`'s public key, client `second` the other way round; X25519 gives both the same shared
    secret, and HKDF-SHA256 (info binding the ordered pair and the round) turns it into 32 bytes,
    so k(a, b), k(b, a) and the keys of other rounds are independent. Fresh key pairs per round
    are recommended (then a revealed key of a dropped pair says nothing about other rounds).
    A deployment uses this in place of `pair_keys`; `prg` expands it exactly as in simulation.
    """
    if not (0 <= first < 1 << 32 and 0 <= second < 1 << 32) or first == second:
        raise ValueError("first and second must be distinct roster indices in [0, 2^32)")
    round_id = bytes(round_id)
    shared = own_private.exchange(peer_public)
    info = (
        _AGREE_INFO
        + first.to_bytes(4, "little")
        + second.to_bytes(4, "little")
        + len(round_id).to_bytes(4, "little")
        + round_id
    )
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(shared)


def _expand_into(keys: np.ndarray, out: np.ndarray) -> None:
    """Write the AES-256-CTR keystream of keys[i] into out[i] (C-contiguous (m, length) uint32).

    One cipher context per key (its only stream), written straight into the output buffer. The
    algorithm and `Cipher` objects are made once and re-keyed by assigning `key` (checked above:
    32 bytes each), which saves about a fifth of the per-key cost; tests compare the result with a
    fresh `Cipher` per key."""
    m, length = out.shape
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    if m == 0 or length == 0:
        return
    keys = np.ascontiguousarray(keys, np.uint8)
    if keys.shape != (m, KEY_BYTES):
        raise ValueError(f"keys must have shape ({m}, {KEY_BYTES}); got {keys.shape}")
    row = 4 * length
    zeros = bytes(row)
    flat = out.reshape(-1).data.cast("B")
    raw = keys.tobytes()
    algorithm = algorithms.AES256(raw[:KEY_BYTES])
    encryptor = Cipher(algorithm, modes.CTR(_NONCE)).encryptor
    # Rows written in place by update_into, given flat[i·row:]: some versions of `cryptography`
    # want a block's slack (15 bytes) past the data, so the last rows go through update().
    direct = max(0, m - (row + 14) // row)
    for i in range(direct):
        algorithm.key = raw[i * KEY_BYTES : (i + 1) * KEY_BYTES]
        encryptor().update_into(zeros, flat[i * row :])
    for i in range(direct, m):
        algorithm.key = raw[i * KEY_BYTES : (i + 1) * KEY_BYTES]
        flat[i * row : (i + 1) * row] = encryptor().update(zeros)
    if sys.byteorder == "big":  # the keystream is read as little-endian words
        out.byteswap(inplace=True)


def prg(keys: np.ndarray, length: int) -> np.ndarray:
    """The mask each 256-bit key expands to: (len(keys), length) uint32, uniform on Z_{2^32}.

    The first 4·length bytes of the key's AES-256-CTR keystream (counter blocks 0, 1, … as
    128-bit big-endian integers), as little-endian words. One cipher context per key.
    """
    keys = np.asarray(keys, np.uint8)
    if keys.ndim != 2 or keys.shape[1] != KEY_BYTES:
        raise ValueError(f"keys must have shape (m, {KEY_BYTES}); got {keys.shape}")
    out = np.empty((len(keys), int(length)), np.uint32)
    _expand_into(keys, out)
    return out


def cohort_masks(key: bytes, first: int, stop: int, n: int, k: int, length: int) -> np.ndarray:
    """The total masks of roster clients first..stop−1, (stop − first, length) uint32:
    Σ_d PRG(k(i, i+d)) − PRG(k(i−d, i)) over d = 1..k, mod 2^32.

    Client i's predecessor mask at distance d is client i−d's successor mask, so each pass
    expands the successor keys of clients first−d..stop−1 once and uses them twice.
    """
    key = _check_key(key)
    nb = stop - first
    total = np.zeros((nb, length), np.uint32)
    if nb <= 0 or k <= 0 or length <= 0:
        return total
    succ_buf = np.empty((nb + k, length), np.uint32)  # reused by every pass
    for d in range(1, k + 1):  # K = O(log n) passes
        rows = np.arange(first - d, stop, dtype=np.int64) % n
        succ = succ_buf[: nb + d]
        _expand_into(pair_keys(key, rows, (rows + d) % n), succ)
        total += succ[d:]
        total -= succ[:nb]
    return total


def broken_pairs(missing: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Ordered pairs (first, second) with exactly one end missing: their masks do not cancel.

    Sorted and unique; a missing client's surviving neighbours must reveal these keys.
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


def exposed_survivors(missing: np.ndarray, n: int, k: int) -> np.ndarray:
    """Surviving clients all of whose 2K neighbours are missing, sorted.

    Recovery would reveal every key such a client holds, and so its report: the server must
    refuse to unmask (a lone survivor is listed too, though its report is then the sum)."""
    miss = np.zeros(n, bool)
    miss[missing] = True
    if k <= 0 or miss.all():
        return np.zeros(0, np.int64)
    idx = np.arange(n)
    alive = np.zeros(n, bool)  # survivors with at least one surviving neighbour
    for d in range(1, k + 1):
        alive |= ~miss[(idx + d) % n] | ~miss[(idx - d) % n]
    return np.flatnonzero(~miss & ~alive)


def recovery_correction(
    first: np.ndarray, second: np.ndarray, keys: np.ndarray, missing_mask: np.ndarray, length: int
) -> np.ndarray:
    """What to add to the survivors' sum to remove the masks that no longer cancel, uint32.

    `keys` (m, 32) uint8 are the revealed keys of the broken pairs (first[i] → second[i]). A
    surviving first end added PRG(k); a surviving second end subtracted it.
    """
    out = np.zeros(length, np.uint32)
    if len(keys) == 0:
        return out
    masks = prg(keys, length)
    survivor_first = ~missing_mask[first]
    out -= masks[survivor_first].sum(axis=0, dtype=np.uint32)
    out += masks[~survivor_first].sum(axis=0, dtype=np.uint32)
    return out
