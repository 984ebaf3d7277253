"""Saved releases: the aggregate a protocol run produced, as a versioned JSON document.

Schema ``fedeval.aggregate/1``: the privacy configuration, the population, the summed counts of
every released node and the reports per level (the `Release`), and the score range the cells
cover. Everything fedeval estimates can be recomputed from it, with error bars, without the raw
data. Compatibility contract as for reports: within version 1 fields are never removed or
re-meant; a reader refuses a newer version.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

import fedeval
from fedeval.config import config_dict, config_from_dict
from fedeval.documents import load_document, write_document
from fedeval.errors import FedevalError, InputError
from fedeval.release import Release

SCHEMA_PREFIX = "fedeval.aggregate/"
VERSION = 1
SCHEMA = f"{SCHEMA_PREFIX}{VERSION}"


def release_dict(
    release: Release, score_range: tuple[float, float], *, source: str | None = None
) -> dict[str, Any]:
    cfg = release.config
    return {
        "schema": SCHEMA,
        "fedeval_version": fedeval.__version__,
        "privacy": config_dict(cfg),
        "source": source,
        "score_range": [float(score_range[0]), float(score_range[1])],
        "population": release.population,
        "n_clients": release.n_clients,
        "reporters": release.reporters.tolist(),
        "counts": release.counts.tolist(),
    }


def save_release(
    path: str | os.PathLike,
    release: Release,
    score_range: tuple[float, float],
    *,
    source: str | None = None,
) -> None:
    """Write the aggregate atomically."""
    write_document(release_dict(release, score_range, source=source), path)


def load_release(path: str | os.PathLike) -> tuple[Release, tuple[float, float]]:
    """Read and check a saved aggregate; `InputError` names the file and what is wrong."""
    name = str(path)
    doc = load_document(
        path,
        prefix=SCHEMA_PREFIX,
        version=VERSION,
        noun="aggregate",
        kind="an aggregate",
        hint="Save one with `fedeval evaluate FILE --save-release aggregate.fedeval`.",
    )
    try:
        config = config_from_dict(doc["privacy"])
        lo, hi = (float(x) for x in doc["score_range"])
        counts = np.asarray(doc["counts"])
        reporters = np.asarray(doc["reporters"])
        if counts.dtype.kind != "i" or reporters.dtype.kind != "i":
            raise ValueError("counts and reporters must be integers")
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError("score_range must be two finite numbers lo < hi")
        release = Release(
            config,
            int(doc["population"]),
            counts.astype(np.int64),
            reporters.astype(np.int64),
            int(doc["n_clients"]),
        )
    except KeyError as e:
        raise InputError(f"'{name}' is not a valid aggregate: field {e} is missing.") from None
    except (FedevalError, TypeError, ValueError) as e:
        raise InputError(f"'{name}' is not a valid aggregate: {e}") from None
    return release, (lo, hi)
