"""Saved releases: the aggregate a protocol run produced, as a versioned JSON document.

Schema ``fedeval.aggregate/2``: the privacy claim (the mechanism's section: configuration,
relation, noise, DP event, guarantee), the summed counts of every released node, the number of
cohorts (secure sums) they add up, the score range the cells cover, and only the exact counts
the mechanism may publish (reports per level under localdp and without DP, the number of
clients under replace and without DP; nothing exact under add-remove). No seed, no path. The
document is sealed with a SHA-256 digest of its canonical content (optionally Ed25519-signed);
loading verifies it and checks the counts' consistency. Everything fedeval estimates can be
recomputed from it, with error bars, without the raw data.

Compatibility contract: within version 2 fields are never removed or re-meant; a reader refuses a
newer version. Version 1 documents are refused: their distdp releases published exact counts
beside the noisy ones, so the guarantee they printed did not hold.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from fedeval.core.axis import ScoreAxis
from fedeval.core.errors import FedevalError, InputError
from fedeval.core.release import Release
from fedeval.core.version import __version__
from fedeval.documents.consistency import check_release_consistency
from fedeval.documents.files import load_document, write_document
from fedeval.documents.seals import digest
from fedeval.privacy.mechanism import mechanism_from_section, mechanism_of

SCHEMA_PREFIX = "fedeval.aggregate/"
VERSION = 2
SCHEMA = f"{SCHEMA_PREFIX}{VERSION}"


def release_dict(release: Release, score_range: tuple[float, float] | ScoreAxis) -> dict[str, Any]:
    """The document of `release`: what the analyst receives, and nothing more. The axis (the
    score range, and the cell edges declared thresholds were aligned to) is public: it depends on
    the options alone, never on the data."""
    mech = mechanism_of(release.config, seeded=release.seeded, probe=release.probe)
    axis = score_range if isinstance(score_range, ScoreAxis) else ScoreAxis.linear(*score_range)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "fedeval_version": __version__,
        "privacy": mech.section(),
        **axis.to_dict(),
        "cohorts": release.cohorts,
        "counts": release.counts.tolist(),
    }
    if release.reporters is not None:
        doc["reporters"] = release.reporters.tolist()
    if release.n_clients is not None and mech.exact_counts_public:
        doc["n_clients"] = release.n_clients
    return doc


def release_digest(release: Release, score_range: tuple[float, float] | ScoreAxis) -> str:
    """The charge id of a release (`fedeval.privacy.ledger`): the SHA-256 its saved file's seal
    holds, the digest of `release_dict`, whether or not it is saved."""
    return digest(release_dict(release, score_range))


def save_release(
    path: str | os.PathLike[str],
    release: Release,
    score_range: tuple[float, float] | ScoreAxis,
    *,
    sign_key: Any = None,
) -> None:
    """Write the aggregate atomically, sealed (and signed with `sign_key`, an Ed25519 private
    key, if given)."""
    write_document(release_dict(release, score_range), path, sign_key=sign_key)


def load_release(
    path: str | os.PathLike[str], *, verify_key: Any = None
) -> tuple[Release, ScoreAxis]:
    """Read, verify and check a saved aggregate, and the axis its leaves cut; `InputError` names
    the file and what is wrong.

    `verify_key` (an Ed25519 public key) requires a valid signature by that key."""

    name = str(path)
    hint = "Save one with `fedeval evaluate FILE --save-release aggregate.fedeval`."
    doc = load_document(
        path,
        prefix=SCHEMA_PREFIX,
        version=VERSION,
        noun="aggregate",
        kind="an aggregate",
        hint=hint,
        verify_key=verify_key,
    )
    if doc["schema"] != SCHEMA:
        raise InputError(
            f"'{name}' is a '{doc['schema']}' document: releases before {SCHEMA} published exact "
            "counts beside the noisy ones, so their privacy guarantee did not hold. Aggregate "
            "or simulate the release again with this version."
        )
    try:
        mech = mechanism_from_section(doc["privacy"])
        config, seeded = mech.config, mech.seeded
        lo, hi = (float(x) for x in doc["score_range"])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError("score_range must be two finite numbers lo < hi")
        axis = ScoreAxis.from_dict(doc)
        counts = _integers(doc["counts"], "counts")
        reporters = _integers(doc["reporters"], "reporters") if "reporters" in doc else None
        n_clients = doc.get("n_clients")
        if n_clients is not None and (
            isinstance(n_clients, bool) or not isinstance(n_clients, int)
        ):
            raise ValueError("n_clients must be an integer")
        cohorts = doc["cohorts"]
        if isinstance(cohorts, bool) or not isinstance(cohorts, int):
            raise ValueError("cohorts must be an integer")
        release = Release(config, counts, reporters, n_clients, cohorts, seeded, mech.probe)
        if not mech.exact_counts_public and (reporters is not None or n_clients is not None):
            raise ValueError(f"a {config.relation} release must not carry exact counts")
    except KeyError as e:
        raise InputError(f"'{name}' is not a valid aggregate: field {e} is missing.") from None
    except (FedevalError, TypeError, ValueError) as e:
        raise InputError(f"'{name}' is not a valid aggregate: {e}") from None
    check_release_consistency(release, (lo, hi), name)
    return release, axis


def _integers(values: object, field: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"{field} must be a list of integers")
    return arr.astype(np.int64)
