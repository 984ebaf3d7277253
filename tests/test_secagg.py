"""Pairwise masks: they cancel in the cohort's sum, hide a single report, and recover dropouts;
keys come from the OS CSPRNG (simulation) or X25519 + HKDF (deployment), masks from AES-CTR."""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from scipy import stats

from fedeval.protocol import secagg


def all_masks(key, n, k, length, batch=7):
    """Every client's mask, computed in uneven batches as encode does."""
    return np.concatenate(
        [secagg.cohort_masks(key, a, min(a + batch, n), n, k, length) for a in range(0, n, batch)]
    )


def keys_of(*raw: bytes) -> np.ndarray:
    return np.frombuffer(b"".join(raw), np.uint8).reshape(-1, 32)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 301])
def test_masks_cancel_in_the_cohort_sum(n):
    key = np.random.default_rng(n).bytes(32)  # any 32-byte key; seeded so the test is fixed
    k = secagg.neighbours_per_side(n)
    masks = all_masks(key, n, k, 9)
    assert not masks.sum(axis=0, dtype=np.uint32).any()
    if n > 1:  # and each client's own mask is not zero
        assert masks.any(axis=1).all()
    # Batching does not change any client's mask.
    np.testing.assert_array_equal(masks, all_masks(key, n, k, 9, batch=max(1, n)))


def test_neighbours_per_side_is_log_n_and_capped():
    assert secagg.neighbours_per_side(1) == 0
    assert secagg.neighbours_per_side(2) == 1
    assert secagg.neighbours_per_side(1000) == 10
    assert secagg.neighbours_per_side(1 << 20) == 20
    assert secagg.neighbours_per_side(5, requested=10) == 4


def test_round_keys_come_fresh_from_the_os():
    a, b = secagg.round_key(), secagg.round_key()
    assert isinstance(a, bytes) and len(a) == 32 and len(b) == 32
    assert a != b


def test_pair_keys_are_ordered_keyed_and_batch_free():
    rng = np.random.default_rng(0)
    key, other = rng.bytes(32), rng.bytes(32)
    a, b = np.array([3]), np.array([8])
    k_ab = secagg.pair_keys(key, a, b)
    assert k_ab.shape == (1, 32) and k_ab.dtype == np.uint8
    assert not np.array_equal(k_ab, secagg.pair_keys(key, b, a))
    assert not np.array_equal(k_ab, secagg.pair_keys(other, a, b))
    np.testing.assert_array_equal(k_ab, secagg.pair_keys(bytes(bytearray(key)), a, b))
    # One batch gives each pair the key it gets alone (recovery derives broken pairs' keys apart
    # from the batches that masked them).
    first = rng.integers(0, 1 << 32, 50)
    second = rng.integers(0, 1 << 32, 50)
    batch = secagg.pair_keys(key, first, second)
    for i in (0, 17, 49):
        alone = secagg.pair_keys(key, first[i : i + 1], second[i : i + 1])
        np.testing.assert_array_equal(batch[i], alone[0])
    assert len({row.tobytes() for row in batch}) == 50
    assert secagg.pair_keys(key, np.zeros(0, int), np.zeros(0, int)).shape == (0, 32)
    with pytest.raises(ValueError):
        secagg.pair_keys(key[:16], a, b)
    with pytest.raises(ValueError):
        secagg.pair_keys(key, np.array([-1]), b)


def _aes256_ctr_by_ecb(key: bytes, length: int) -> np.ndarray:
    """AES-256-CTR from its definition: ECB of the counter blocks 0, 1, … (128-bit big-endian)."""
    blocks = -(-4 * length // 16)
    counters = b"".join(i.to_bytes(16, "big") for i in range(blocks))
    stream = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(counters)
    return np.frombuffer(stream[: 4 * length], "<u4")


@pytest.mark.parametrize("length", [1, 4, 5, 37, 513])
def test_prg_is_aes256_ctr_of_each_key(length):
    rng = np.random.default_rng(length)
    raw = [rng.bytes(32) for _ in range(10)]
    out = secagg.prg(keys_of(*raw), length)
    assert out.shape == (10, length) and out.dtype == np.uint32
    for i, key in enumerate(raw):
        np.testing.assert_array_equal(out[i], _aes256_ctr_by_ecb(key, length))
        fresh = Cipher(algorithms.AES256(key), modes.CTR(bytes(16))).encryptor()
        np.testing.assert_array_equal(out[i], np.frombuffer(fresh.update(bytes(4 * length)), "<u4"))
    # Known answer: AES-256 of the zero block under the zero key is dc95c078 a2408989 ….
    np.testing.assert_array_equal(
        secagg.prg(np.zeros((1, 32), np.uint8), 2)[0], [0x78C095DC, 0x898940A2]
    )
    assert secagg.prg(np.zeros((0, 32), np.uint8), 3).shape == (0, 3)
    with pytest.raises(ValueError):
        secagg.prg(np.zeros((2, 16), np.uint8), 3)


def test_masks_do_not_repeat_across_pairs():
    key = np.random.default_rng(5).bytes(32)
    n, length = 64, 16
    k = secagg.neighbours_per_side(n)
    firsts = np.concatenate([np.arange(n)] * k)
    seconds = (firsts + np.repeat(np.arange(1, k + 1), n)) % n
    keys = secagg.pair_keys(key, firsts, seconds)
    masks = secagg.prg(keys, length)
    words = masks.view(np.uint64).ravel()  # 3,072 64-bit words: a repeat has chance ~2^-44
    assert len(np.unique(words)) == len(words)
    # Another round key gives other masks for the same pairs.
    other = secagg.prg(
        secagg.pair_keys(np.random.default_rng(6).bytes(32), firsts, seconds), length
    )
    assert not np.intersect1d(words, other.view(np.uint64).ravel()).size
    # And the two directions of a pair do not cancel.
    back = secagg.prg(secagg.pair_keys(key, seconds, firsts), length)
    assert (back != masks).any(axis=1).all()


def _chi2_uniform_p(words: np.ndarray) -> float:
    """χ² goodness of fit of 32-bit words to uniform, on their top 4 and bottom 4 bits."""
    ps = []
    for nibble in (words >> 28, words & 15):
        observed = np.bincount(nibble.astype(np.int64), minlength=16)
        ps.append(stats.chisquare(observed).pvalue)
    return min(ps)


@pytest.mark.slow
def test_a_single_masked_report_is_uniform():
    # One client's masked report over 4,000 independent rounds (fresh round keys): whatever its
    # counts, each entry must be uniform on Z_2^32. χ² on 16 bins (15 df) with 4,000 × 8 words;
    # a Bonferroni level of 0.001/2 on two nibbles keeps a false alarm unlikely, and seeded round
    # keys (in place of `round_key()`) keep the test fixed.
    rng = np.random.default_rng(11)
    n, length, rounds = 50, 8, 4000
    k = secagg.neighbours_per_side(n)
    counts = np.array([0, 1, 2, 3, 50, 0, 7, 1], np.uint32)  # a client's real report
    words = np.empty((rounds, length), np.uint32)
    for r in range(rounds):
        words[r] = counts + secagg.cohort_masks(rng.bytes(32), 0, 1, n, k, length)
    assert _chi2_uniform_p(words.ravel()) > 0.001
    # The same test has power: the unmasked counts are nowhere near uniform.
    assert _chi2_uniform_p(np.tile(counts, rounds)) < 1e-10
    # And two clients with different counts are indistinguishable (two-sample KS on the words).
    other = np.empty_like(words)
    for r in range(rounds):
        other[r] = secagg.cohort_masks(rng.bytes(32), 0, 1, n, k, length)
    assert stats.ks_2samp(words.ravel(), other.ravel()).pvalue > 0.001


def test_broken_pairs_are_exactly_the_pairs_with_one_end_missing():
    n, k = 23, 3
    missing = np.array([0, 4, 5, 22])
    first, second = secagg.broken_pairs(missing, n, k)
    miss = set(missing.tolist())
    expected = sorted(
        (a, (a + d) % n)
        for a in range(n)
        for d in range(1, k + 1)
        if (a in miss) != ((a + d) % n in miss)
    )
    assert list(zip(first.tolist(), second.tolist(), strict=True)) == expected


def test_exposed_survivors_are_those_whose_neighbours_all_dropped():
    n, k = 20, 2
    missing = np.array([3, 4, 6, 7, 12, 13])  # 5 has neighbours 3, 4, 6, 7: all missing
    assert secagg.exposed_survivors(missing, n, k).tolist() == [5]
    assert secagg.exposed_survivors(np.array([0, 1]), n, k).size == 0
    assert secagg.exposed_survivors(np.arange(1, 5), 5, 2).tolist() == [0]  # the lone survivor
    assert secagg.exposed_survivors(np.arange(5), 5, 2).size == 0


@pytest.mark.parametrize("n,dropped", [(40, [3]), (40, [0, 1, 2, 39]), (9, [4, 5]), (2, [1])])
def test_recovery_removes_the_masks_of_dropped_clients(n, dropped):
    rng = np.random.default_rng(n + len(dropped))
    key = rng.bytes(32)
    k = secagg.neighbours_per_side(n)
    length = 5
    values = rng.integers(0, 1000, size=(n, length)).astype(np.uint32)
    masked = values + all_masks(key, n, k, length)
    miss = np.zeros(n, bool)
    miss[dropped] = True
    survivors_sum = masked[~miss].sum(axis=0, dtype=np.uint32)
    assert not np.array_equal(survivors_sum, values[~miss].sum(axis=0, dtype=np.uint32))
    first, second = secagg.broken_pairs(np.array(dropped), n, k)
    keys = secagg.pair_keys(key, first, second)
    assert keys.shape == (len(first), 32)
    fixed = survivors_sum + secagg.recovery_correction(first, second, keys, miss, length)
    np.testing.assert_array_equal(fixed, values[~miss].sum(axis=0, dtype=np.uint32))


def test_agreed_pair_keys_match_at_both_ends_and_differ_elsewhere():
    a, b, c = (X25519PrivateKey.generate() for _ in range(3))
    key = secagg.agree_pair_key(a, b.public_key(), 3, 8, b"round-1")
    assert isinstance(key, bytes) and len(key) == 32
    assert key == secagg.agree_pair_key(b, a.public_key(), 3, 8, b"round-1")
    others = {
        secagg.agree_pair_key(a, b.public_key(), 8, 3, b"round-1"),  # the other direction
        secagg.agree_pair_key(a, b.public_key(), 3, 8, b"round-2"),  # another round
        secagg.agree_pair_key(a, b.public_key(), 3, 9, b"round-1"),  # another pair
        secagg.agree_pair_key(a, c.public_key(), 3, 8, b"round-1"),  # another peer
        secagg.agree_pair_key(a, b.public_key(), 3, 8, b"round-10"),
    }
    assert key not in others and len(others) == 5
    with pytest.raises(ValueError):
        secagg.agree_pair_key(a, b.public_key(), 3, 3, b"round-1")


def test_deployment_keys_feed_the_same_expansion():
    # Each client holds only its own X25519 key and its neighbours' public keys; its mask is the
    # same Σ_d PRG(k(i, i+d)) − PRG(k(i−d, i)) as `cohort_masks`, with agreed keys. They cancel,
    # and the recovery of a dropout works from the keys its neighbours reveal.
    n, length, round_id = 7, 6, b"r42"
    k = secagg.neighbours_per_side(n)
    private = [X25519PrivateKey.generate() for _ in range(n)]
    public = [p.public_key() for p in private]

    def client_mask(i):
        total = np.zeros(length, np.uint32)
        for d in range(1, k + 1):
            s, p = (i + d) % n, (i - d) % n
            succ = secagg.agree_pair_key(private[i], public[s], i, s, round_id)
            pred = secagg.agree_pair_key(private[i], public[p], p, i, round_id)
            total += secagg.prg(keys_of(succ), length)[0]
            total -= secagg.prg(keys_of(pred), length)[0]
        return total

    masks = np.stack([client_mask(i) for i in range(n)])
    assert not masks.sum(axis=0, dtype=np.uint32).any()
    assert masks.any(axis=1).all()
    miss = np.zeros(n, bool)
    miss[2] = True
    first, second = secagg.broken_pairs(np.array([2]), n, k)
    revealed = keys_of(
        *(
            # the surviving end reveals the key of each broken pair
            secagg.agree_pair_key(private[b if a == 2 else a], public[2], a, b, round_id)
            for a, b in zip(first.tolist(), second.tolist(), strict=True)
        )
    )
    correction = secagg.recovery_correction(first, second, revealed, miss, length)
    assert not (masks[~miss].sum(axis=0, dtype=np.uint32) + correction).any()
