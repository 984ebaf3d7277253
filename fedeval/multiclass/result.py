"""The result of a multiclass calibration and its document: the methods, the defaults the API and
the CLI share, the fitted map with its metrics and privacy claim, and `fedeval.calibration-map/2`
(kind "multiclass") built from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from fedeval.core.version import __version__
from fedeval.documents.files import document_text
from fedeval.documents.map_file import SCHEMA
from fedeval.multiclass.binning import BinningCalibrator, BinningFit
from fedeval.multiclass.data import (
    ColumnSpec,
    InputKind,
)
from fedeval.multiclass.denoise import NoisyBinning
from fedeval.multiclass.federation import max_client_rounds
from fedeval.multiclass.maps import (
    KIND,
    calibrated_probs,
    calibrator_fields,
)
from fedeval.multiclass.metrics import Metrics
from fedeval.multiclass.temperature import (
    Safeguard,
    TemperatureCalibrator,
    TemperatureFit,
)
from fedeval.privacy.gaussian import DPStatement, MulticlassMechanism
from fedeval.views.dicts import run_section


class Method(StrEnum):
    FEDBIN = "fedbin"
    FEDBBQ = "fedbbq"
    FEDTEMP = "fedtemp"

    @property
    def is_binning(self) -> bool:
        return self is not Method.FEDTEMP

    @property
    def order_preserving(self) -> bool:
        """Whether the calibrator keeps every row's ranking of the classes (top-1 accuracy
        cannot change): temperature scaling does; one-vs-all binning, renormalised, does not."""
        return self is Method.FEDTEMP

    @property
    def display_name(self) -> str:
        return {"fedbin": "FedBin", "fedbbq": "FedBBQ", "fedtemp": "FedTemp"}[self.value]


class Partition(StrEnum):
    IID = "iid"
    DIRICHLET = "dirichlet"
    COLUMN = "column"


DEFAULT_CLIENTS = 100


DEFAULT_ROUNDS = 12


DEFAULT_PARTICIPATION = 0.1
"""K = 100 clients, T = 12 rounds, 10 % sampled per round: the paper's main setting (Table 2)."""


DP_TEMPERATURE_PARTICIPATION = 1.0
"""FedTemp under DP: every client every round. No amplification by subsampling is claimed, so a
client is charged for the rounds it is in, and a round's noise σ is divided by its cohort size
m: the noise left in T after the averaged rounds falls like z(r)/(m·√rounds) with r = m·T/K,
i.e. like 1/√m — measured at K = 100, T = 12, 10 classes: cwECE 0.5–1.9 % (p = 0.1) against
0.51–0.64 % (p = 1), central 0.50–0.57 %."""


DEFAULT_BINS = 128
"""2^M with M = 7, the paper's choice for FedBBQ (section 4.1, appendix A.3.3)."""


DEFAULT_DP_BINS = 32
"""Under user-level DP: every bin carries the same noise, so 32 bins hold 4× the data of 128
against the same σ; with fewer the map is too coarse to follow the confidence."""


MAX_BINS = 4096
"""32× the default: finer bins hold too few examples each to estimate anything."""


DEFAULT_DELTA = 1e-5
"""The paper's δ; it should stay well below 1/K."""


DEFAULT_COLUMNS = ColumnSpec()


DEFAULT_HOLDOUT = 0.2
"""Rows held out for measuring: in-sample figures flatter a binning map of c·2^M values."""


@dataclass(frozen=True)
class MulticlassResult:
    """A fitted multiclass calibrator with how it was trained and what it does.

    `before`/`after` are exact metrics of the held-out rows (in simulation the data are at
    hand; a deployment would need its own private evaluation), in-sample if `holdout` was 0: they
    appear in the printed table and the JSON report, never in a DP map written to share.
    `privacy` is the calibrated noise, None without DP; `mechanism` states the claim.
    `seeded`: the noise came from a given seed or Generator (a reproducible simulation, NOT
    private); `seed` is that seed (None when unseeded — the noise then came from the OS CSPRNG
    and no seed exists to publish — or when a Generator was passed).
    """

    method: Method
    weighted: bool | None
    calibrator: BinningCalibrator | TemperatureCalibrator = field(repr=False)
    input_kind: InputKind
    n_classes: int
    bins: int | None
    rounds: int
    participation: float
    clients: int
    partition: Partition
    beta: float | None
    server_lr: float | None
    privacy: DPStatement | None
    clip: dict[str, float] | None = field(hash=False)
    """Clip norms applied (under DP: the statement's; without DP only if asked for)."""
    before: Metrics
    after: Metrics
    ece_bins: int
    rows: int
    fit_rows: int
    eval_rows: int
    in_sample: bool
    seed: int | None
    seeded: bool
    columns: ColumnSpec
    per_client: bool
    fit: BinningFit | TemperatureFit = field(repr=False, compare=False)
    pooled: bool = False
    safeguard: Safeguard | NoisyBinning | None = None
    """FedTemp's held-out check of the fitted T against the identity (None: no held-out rows);
    when it fails, `calibrator` is the identity T = 1 and `fit` still holds the fitted T. Under
    DP, binning's check from the noisy release itself (`denoise.NoisyBinning`, no privacy
    cost); when it fails, every bin weight is 0 (the identity)."""
    eval_mask: np.ndarray | None = field(default=None, repr=False, compare=False)
    """The rows measured (held out; all rows when in-sample)."""

    @property
    def fell_back(self) -> bool:
        """The fitted calibrator did not pass its check (FedTemp's held-out check, binning's
        check from the noisy release); the identity is released."""
        return self.safeguard is not None and not self.safeguard.kept

    @property
    def mechanism(self) -> MulticlassMechanism:
        """The privacy claim of this run (the section every document carries)."""
        return MulticlassMechanism(self.privacy, self.seeded)

    @property
    def accuracy_change(self) -> float:
        """Accuracy after − before on the measured rows (negative: the calibrator costs)."""
        return self.after.accuracy - self.before.accuracy

    @property
    def name(self) -> str:
        """The method as the paper names it, e.g. "FedBBQ (all weight)"."""
        if self.weighted is None:
            return self.method.display_name
        return f"{self.method.display_name} ({'all weight' if self.weighted else 'unweighted'})"

    def apply(self, x: np.ndarray) -> np.ndarray:
        """Calibrated probabilities for an (n, c) matrix of the input kind the map reads."""
        return calibrated_probs(self.calibrator, self.input_kind, np.asarray(x, np.float64))

    def to_dict(self, *, source: str | None = None) -> dict[str, Any]:
        """The report ``fedeval calibrate --multiclass --format json`` writes (exact metrics
        included); `shareable_map(to_dict())` is the map file to hand on."""
        return multiclass_map_dict(self, source=source)

    def to_json(self, *, source: str | None = None) -> str:
        """`to_dict` as the sealed JSON text the command line writes."""

        return document_text(self.to_dict(source=source))


def _federation(r: MulticlassResult) -> dict[str, Any]:
    return {
        "clients": r.clients,
        "partition": r.partition.value,
        "beta": r.beta,
        "rounds": r.rounds,
        "participation": r.participation,
        "clip": r.clip,
        "server_lr": (
            None
            if r.method.is_binning
            else (_default_schedule(r) if r.server_lr is None else r.server_lr)
        ),
        "sampling": "cohorts of m = round(p·K) clients drawn without replacement across rounds "
        f"(each client in at most {max_client_rounds(r.clients, r.rounds, r.participation)} "
        "rounds)"
        + ("; each sampled client's histograms are summed once" if r.method.is_binning else ""),
    }


def _default_schedule(r: MulticlassResult) -> str:
    if r.privacy is None:
        return "curvature-weighted running mean of the rounds' proposals in log T"
    return (
        f"log T steps by η = 1 (clipped to ±C) for the first {-(-r.rounds // 2)} rounds, then "
        "the mean of the later rounds' proposals"
    )


def multiclass_map_dict(result: MulticlassResult, *, source: str | None = None) -> dict[str, Any]:
    """`fedeval.calibration-map/2`, kind "multiclass": the calibrator, what it reads, how it
    was trained, the privacy section and the exact metrics of the simulation — the
    `--format json` report (``"exact_values": true``).

    Under DP this report is not the map to share: `write_map` (and `shareable_map`) keep only
    the calibrator, the privacy section and the settings, with no exact metric or count.
    """

    r = result
    run = run_section(r.seeded, r.seed, True, path="per-client" if r.per_client else "fast")
    return {
        "schema": SCHEMA,
        "fedeval_version": __version__,
        "kind": KIND,
        "simulation": True,
        "exact_values": True,
        "method": r.method.value,
        "method_name": r.name,
        "weighted": r.weighted,
        "input": r.input_kind.value,
        "classes": r.n_classes,
        "columns": {
            "label": r.columns.label,
            "prob_prefix": r.columns.prob_prefix,
            "logit_prefix": r.columns.logit_prefix,
        },
        "output_prefix": "cal_prob_",
        "pooled": r.pooled,
        "order_preserving": r.method.order_preserving,
        "calibrator": calibrator_fields(r.calibrator),
        "safeguard": None if r.safeguard is None else r.safeguard.to_dict(),
        "privacy": r.mechanism.section(),
        "federation": _federation(r),
        "data": {
            "source": source,
            "rows": r.rows,
            "fit_rows": r.fit_rows,
            "eval_rows": r.eval_rows,
        },
        "metrics": {
            "bins": r.ece_bins,
            "measured_on": "the fitting rows (in-sample)" if r.in_sample else "held-out rows",
            "in_sample": r.in_sample,
            "exact": True,
            "before": r.before.to_dict(),
            "after": r.after.to_dict(),
            "accuracy_change": r.accuracy_change,
        },
        "run": run,
    }
