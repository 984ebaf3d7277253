"""Consistency checks of saved releases: a valid release passes, and editing one count of it
(or one stated total) fires the check that names what cannot be."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest

from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.core.errors import InputError
from fedeval.core.release import Release, level_offsets
from fedeval.documents.consistency import check_release_consistency
from fedeval.documents.seals import seal
from fedeval.privacy import distdp, federated, localdp

NAME = "run.fedeval"
RANGE = (0.0, 1.0)


def leaf_counts(height: int, seed: int = 0) -> np.ndarray:
    """Per-class leaf counts (2, 2^h): 700 negatives, 300 positives."""
    rng = np.random.default_rng(seed)
    n = 1 << height
    return np.stack(
        [rng.multinomial(700, np.full(n, 1 / n)), rng.multinomial(300, np.full(n, 1 / n))]
    )


def config(model: str, shape: str = "hierarchy", height: int = 4, **kw) -> PrivacyConfig:
    eps = None if model == "federated" else {"distdp": 1.0, "localdp": 5.0}[model]
    return PrivacyConfig(PrivacyModel(model), height, Shape(shape), eps, **kw)


def release_of(cfg: PrivacyConfig, n_clients: int = 50, seed: int = 0) -> Release:
    mech = {"federated": federated, "distdp": distdp, "localdp": localdp}[cfg.model.value]
    return mech.draw(leaf_counts(cfg.height, seed), n_clients, cfg, np.random.default_rng(seed))


def with_counts(release: Release, counts: np.ndarray) -> Release:
    return replace(release, counts=counts)


def node(cfg: PrivacyConfig, level_index: int, cls: int, cell: int) -> int:
    """Index in the flat node vector of (level, class, cell)."""
    k = cfg.levels[level_index]
    return int(level_offsets(cfg)[level_index]) + (cls << k) + cell


def refused(release: Release, pattern: str, score_range=RANGE) -> str:
    with pytest.raises(InputError) as info:
        check_release_consistency(release, score_range, NAME)
    msg = str(info.value)
    assert msg.startswith(f"'{NAME}': consistency check failed: ")
    assert "\n" not in msg
    assert re.search(pattern, msg), msg
    return msg


@pytest.mark.parametrize(
    "cfg",
    [
        config("federated"),
        config("federated", "flat", 6),
        config("federated", unit="client", max_examples=20),
        config("distdp"),
        config("distdp", "flat"),
        config("localdp"),
        config("localdp", "flat"),
        config("localdp", unit="client", max_examples=20),
    ],
    ids=str,
)
def test_valid_releases_pass(cfg):
    rel = release_of(cfg)
    check_release_consistency(rel, RANGE, NAME)
    check_release_consistency(rel + release_of(cfg, seed=1), (-2.0, 3.5), NAME)  # merged


# ---- every model ----------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["federated", "distdp", "localdp"])
def test_counts_must_be_finite_integers(model):
    rel = release_of(config(model))
    for bad in (np.nan, np.inf, 2.5):
        counts = rel.counts.astype(np.float64)
        counts[3] = bad
        refused(with_counts(rel, counts), "every count must be a finite integer")
    # Integral floats are integers.
    check_release_consistency(with_counts(rel, rel.counts.astype(np.float64)), RANGE, NAME)


def test_score_range_and_stated_totals_are_checked():
    rel = release_of(config("federated"))
    refused(rel, r"score range \[1.0, 0.0\]", score_range=(1.0, 0.0))
    refused(rel, "score range", score_range=(0.0, float("inf")))
    refused(replace(rel, n_clients=-1), "number of clients")
    reporters = rel.reporters.copy()
    reporters[1] = -5
    refused(replace(rel, reporters=reporters), r"level 2 has -5 reports \(negative\)")


def test_distdp_accepts_negative_noisy_counts():
    rel = release_of(config("distdp"))
    counts = rel.counts.copy()
    counts[0] = -7
    check_release_consistency(with_counts(rel, counts), RANGE, NAME)


# ---- federated ------------------------------------------------------------------------------


def test_federated_negative_count():
    cfg = config("federated")
    rel = release_of(cfg)
    counts = rel.counts.copy()
    counts[node(cfg, 2, 1, 5)] = -1
    refused(with_counts(rel, counts), "level 3, positives, cell 5 holds -1; .* cannot be negative")


def test_federated_levels_must_agree():
    cfg = config("federated")
    rel = release_of(cfg)
    counts = rel.counts.copy()
    i = node(cfg, 3, 0, 9)  # a leaf (level 4) negative count, +1
    counts[i] += 1
    refused(
        with_counts(rel, counts),
        r"level 3, negatives, cell 4 holds \d+ but its cells at level 4 sum to \d+",
    )
    counts = rel.counts.copy()
    counts[node(cfg, 0, 1, 1)] += 2  # a level-1 positive count
    refused(with_counts(rel, counts), "level 1, positives, cell 1 holds .* level 2 sum to")


def test_federated_level_totals_must_match_reporters():
    cfg = config("federated", "flat", 6)
    rel = release_of(cfg)
    counts = rel.counts.copy()
    counts[node(cfg, 0, 0, 17)] += 1  # one level: nothing to agree with but the stated rows
    refused(with_counts(rel, counts), "level 6 totals 1001 rows but states 1000 reporters")


def test_federated_levels_agree_without_reporters_too():
    cfg = config("federated")
    rel = replace(release_of(cfg), reporters=None)
    counts = rel.counts.copy()
    # Move one example between two level-1 cells: level 1 still totals the same, but no longer
    # agrees with level 2; then add one example to every level but the leaves.
    counts[node(cfg, 0, 0, 0)] -= 1
    counts[node(cfg, 0, 0, 1)] += 1
    refused(with_counts(rel, counts), "level 1, negatives, cell 0 holds")
    counts = rel.counts.copy()
    for i in range(len(cfg.levels) - 1):  # add one example to every level but the leaves
        counts[node(cfg, i, 0, 0)] += 1
    refused(with_counts(rel, counts), "level 3, negatives, cell 0 .* level 4 sum to")


def test_federated_positives_cannot_exceed_rows():
    cfg = config("federated", "flat", 6)
    rel = release_of(cfg)
    counts = rel.counts.copy()
    counts[node(cfg, 0, 1, 3)] += 1000  # the edit of the issue: AUC moves, rows do not
    refused(with_counts(rel, counts), r"level 6 counts 1300 positives among 1000 rows")
    reporters = rel.reporters.copy()
    reporters[0] = 250  # fewer rows than positives
    refused(replace(rel, reporters=reporters), "300 positives among 250 rows")
    reporters[0] = 999
    refused(replace(rel, reporters=reporters), "totals 1000 rows but states 999 reporters")


def test_federated_unit_client_rows_within_the_cap():
    cfg = config("federated", unit="client", max_examples=20)
    rel = release_of(cfg, n_clients=50)  # 1000 rows ≤ 50 × 20
    refused(replace(rel, n_clients=49), "1000 rows from 49 clients exceed the cap of 20")


# ---- localdp --------------------------------------------------------------------------------


def test_localdp_bit_count_cannot_exceed_reports():
    cfg = config("localdp")
    rel = release_of(cfg)
    counts = rel.counts.copy()
    i = node(cfg, 1, 1, 2)
    n = int(rel.reporters[1])
    counts[i] = n + 1
    refused(
        with_counts(rel, counts),
        rf"level 2, positives, cell 2 counts {n + 1} set bits, outside \[0, {n}\]",
    )
    counts[i] = -1
    refused(with_counts(rel, counts), "counts -1 set bits")
    counts[i] = n  # the edge is allowed
    check_release_consistency(with_counts(rel, counts), RANGE, NAME)


def test_localdp_reporters_edits():
    cfg = config("localdp", "flat")
    rel = release_of(cfg)
    assert int(rel.counts.max()) > 0
    reporters = np.array([int(rel.counts.max()) - 1])
    refused(replace(rel, reporters=reporters), "set bits, outside")
    refused(replace(rel, reporters=None), "must state its number of reports per level")


def test_localdp_unit_client_sends_exactly_l_reports():
    cfg = config("localdp", unit="client", max_examples=20)
    rel = release_of(cfg, n_clients=50)
    assert int(rel.reporters.sum()) == 1000
    refused(replace(rel, n_clients=51), "1000 reports from 51 clients, .* exactly 20 \\(1020")


# ---- through the file -----------------------------------------------------------------------


def test_edited_and_resealed_release_file_is_refused(tmp_path):
    """A forger who recomputes the digest gets past the seal, not past the consistency checks."""
    from fedeval.documents.release_file import load_release, release_dict

    cfg = config("federated")
    rel = release_of(cfg)
    path = tmp_path / NAME
    doc = release_dict(rel, RANGE)
    path.write_text(json.dumps(seal(doc)))
    load_release(path)
    doc["counts"][node(cfg, 3, 1, 0)] += 40
    path.write_text(json.dumps(seal(doc)))
    with pytest.raises(InputError, match=f"'{re.escape(str(path))}': consistency check failed"):
        load_release(path)


def test_edited_release_file_fails_its_seal_first(tmp_path):
    """The issue's edit (counts changed in a saved release, AUC moved): the digest catches it."""
    from fedeval.documents.release_file import load_release, save_release

    rel = release_of(config("distdp"))
    path = tmp_path / NAME
    save_release(path, rel, RANGE)
    doc = json.loads(path.read_text())
    doc["counts"][-1] += 500
    path.write_text(json.dumps(doc, indent=2))
    with pytest.raises(InputError, match="integrity check failed: the SHA-256"):
        load_release(path)
