"""Multiclass post-hoc calibration under federation and user-level DP: the public entry points.

Seed paper 004 (*Private Federated Multiclass Post-hoc Calibration*). One call simulates the
protocol on a labelled table: rows are spread over clients (Dirichlet(β) label skew, IID, or a
client column), a share is held out for measuring, the calibrator is trained over T rounds with
participation p (FedBin, FedBBQ, FedTemp; optionally with user-level DP), and cwECE, top-label
ECE and accuracy are measured before and after on the held-out rows.

>>> import numpy as np
>>> from fedeval.multiclass import calibrate_multiclass
>>> rng = np.random.default_rng(0)
>>> y = rng.integers(0, 3, 3000)
>>> z = 3.0 * (4.0 * np.eye(3)[y] + rng.normal(0, 2.0, (3000, 3)))  # overconfident
>>> r = calibrate_multiclass(y, logits=z, method="fedtemp", clients=10, seed=0)
>>> r.after.cw_ece < r.before.cw_ece and r.accuracy_change == 0.0 and not r.fell_back
True
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fedeval.errors import UsageError
from fedeval.multiclass import federation
from fedeval.multiclass.binning import BinningCalibrator, BinningFit, fed_binning
from fedeval.multiclass.data import (
    LOG_FLOOR,
    ColumnSpec,
    InputKind,
    MulticlassData,
    multiclass_from_arrays,
    read_multiclass,
    softmax,
)
from fedeval.multiclass.federation import max_client_rounds
from fedeval.multiclass.maps import (
    KIND,
    SCHEMA,
    apply_multiclass_map_file,
    calibrated_probs,
    calibrator_fields,
    shareable_map,
)
from fedeval.multiclass.metrics import DEFAULT_ECE_BINS, Metrics, measure
from fedeval.multiclass.privacy import (
    DEFAULT_NEGATIVE_CLIP,
    DEFAULT_POOLED_CLIP,
    DEFAULT_POSITIVE_CLIP,
    DEFAULT_TEMPERATURE_CLIP,
    DPStatement,
    MulticlassMechanism,
    dp_statement,
)
from fedeval.multiclass.temperature import (
    DEFAULT_EVALUATION_CLIP,
    Safeguard,
    TemperatureCalibrator,
    TemperatureFit,
    check_temperature,
    fed_temperature,
)

__all__ = [
    "Method",
    "MulticlassResult",
    "Partition",
    "apply_multiclass_map_file",
    "calibrate_multiclass",
    "calibrate_multiclass_data",
    "calibrate_multiclass_file",
    "multiclass_map_dict",
    "render_multiclass_table",
    "shareable_map",
]


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
    safeguard: Safeguard | None = None
    """FedTemp's held-out check of the fitted T against the identity (None: no held-out rows);
    when it fails, `calibrator` is the identity T = 1 and `fit` still holds the fitted T."""
    eval_mask: np.ndarray | None = field(default=None, repr=False, compare=False)
    """The rows measured (held out; all rows when in-sample)."""

    @property
    def fell_back(self) -> bool:
        """The fitted calibrator did not pass the held-out check; the identity is released."""
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
        from fedeval.documents import document_text

        return document_text(self.to_dict(source=source))


def _input_kind(kind: InputKind | str | None) -> InputKind | None:
    return None if kind is None else _input_kind_given(kind)


def _input_kind_given(kind: InputKind | str) -> InputKind:
    try:
        return InputKind(kind)
    except ValueError:
        raise UsageError(f"`input` takes probs or logits. Found {kind!r}.") from None


def _method(method: Method | str) -> Method:
    try:
        return Method(str(method).lower())
    except ValueError:
        names = ", ".join(m.value for m in Method)
        raise UsageError(f"`method` takes one of {names}. Found {method!r}.") from None


def _positive_number(x: object, option: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not (math.isfinite(x) and x > 0):
        raise UsageError(f"{option} must be a finite number > 0. Found {x!r}.")
    return float(x)


def _clip_pair(
    clip: float | tuple[float, float] | None, pooled: bool = False
) -> tuple[float, float]:
    if clip is None:
        if pooled:
            return DEFAULT_POOLED_CLIP
        return DEFAULT_POSITIVE_CLIP, DEFAULT_NEGATIVE_CLIP
    if isinstance(clip, tuple | list):
        if len(clip) != 2:
            raise UsageError(
                f"binning takes two clip norms C₊,C₋ (positive, negative). Found {clip!r}."
            )
        return _positive_number(clip[0], "`clip` C₊"), _positive_number(clip[1], "`clip` C₋")
    c = _positive_number(clip, "`clip`")
    return c, c


def calibrate_multiclass_data(
    data: MulticlassData,
    *,
    method: Method | str,
    rounds: int = DEFAULT_ROUNDS,
    participation: float | None = None,
    clients: int | None = None,
    beta: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    clip: float | tuple[float, float] | None = None,
    bins: int | None = None,
    weighted: bool = True,
    holdout: float = DEFAULT_HOLDOUT,
    ece_bins: int = DEFAULT_ECE_BINS,
    server_lr: float | None = None,
    input_kind: InputKind | str | None = None,
    columns: ColumnSpec = DEFAULT_COLUMNS,
    seed: int | np.random.Generator | None = None,
    per_client: bool = False,
    pooled: bool | None = None,
) -> MulticlassResult:
    """Simulate federated calibration on validated data; see `calibrate_multiclass_file`."""
    method = _method(method)
    rounds = federation.check_rounds(rounds)
    if participation is None:
        dp_temp = method is Method.FEDTEMP and epsilon is not None
        participation = DP_TEMPERATURE_PARTICIPATION if dp_temp else DEFAULT_PARTICIPATION
    participation = federation.check_participation(participation)
    if not isinstance(ece_bins, int) or ece_bins < 1:
        raise UsageError(f"the ECE needs a whole number of bins ≥ 1. Found {ece_bins!r}.")
    if delta is not None and epsilon is None:
        raise UsageError("`delta` goes with `epsilon` (user-level DP); pass both or neither.")
    n_bins: int | None
    if method.is_binning:
        if server_lr is not None:
            raise UsageError("`server_lr` applies to fedtemp only (binning sums histograms).")
        if bins is None:
            n_bins = DEFAULT_BINS if epsilon is None else DEFAULT_DP_BINS
        else:
            n_bins = bins
        if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 2:
            raise UsageError(f"`buckets` must be a whole number ≥ 2. Found {bins!r}.")
        if n_bins > MAX_BINS:  # every client holds a (classes, bins) histogram per class
            raise UsageError(f"`buckets` must be at most {MAX_BINS}. Found {n_bins}.")
        if method is Method.FEDBBQ and n_bins & (n_bins - 1):
            raise UsageError(
                f"fedbbq merges bins in powers of two: `buckets` must be 2^M (e.g. 128). "
                f"Found {n_bins}."
            )
        pooled = (epsilon is not None) if pooled is None else bool(pooled)
    else:
        if bins is not None:
            raise UsageError("`buckets` applies to fedbin and fedbbq, not fedtemp.")
        if pooled:
            raise UsageError("pooling classes applies to fedbin and fedbbq, not fedtemp.")
        pooled = False
        if not weighted:
            raise UsageError(
                "the heterogeneity weighting is for binning; fedtemp keeps accuracy as it is."
            )
        if server_lr is not None:
            server_lr = _positive_number(server_lr, "`server_lr`")
        n_bins = None

    # Which model outputs the calibrator reads: binning wants probabilities, scaling logits;
    # either can be derived from the other (softmax, or log).
    if input_kind is None:
        prefer = InputKind.PROBS if method.is_binning else InputKind.LOGITS
        have = data.probs if prefer is InputKind.PROBS else data.logits
        other = InputKind.LOGITS if prefer is InputKind.PROBS else InputKind.PROBS
        kind = prefer if have is not None else other
    else:
        kind = _input_kind_given(input_kind)
        if (data.probs if kind is InputKind.PROBS else data.logits) is None:
            raise UsageError(f"`input` {kind.value}: '{data.source}' has no such columns.")
    x_or_none = data.probs if kind is InputKind.PROBS else data.logits
    if x_or_none is None or data.labels is None:  # read_multiclass always gives both
        raise UsageError(f"'{data.source}' holds no labelled {kind.value} to calibrate.")
    x, labels = x_or_none, data.labels
    # "Before" is the model's own probabilities from the columns the calibrator reads, so the
    # before/after comparison is of the same input.

    def base_probs(rows: np.ndarray) -> np.ndarray:
        return x[rows] if kind is InputKind.PROBS else softmax(x[rows])

    from fedeval.simulate import rng_and_seed

    rng, seed_used = rng_and_seed(seed)
    r_partition, r_split, r_rounds, r_noise = rng.spawn(4)
    if data.client is not None:
        if clients is not None or beta is not None:
            raise UsageError(
                "the data have a client column; drop `clients` and `beta` (or the column)."
            )
        client, n_clients, partition = data.client, data.n_clients, Partition.COLUMN
    else:
        n_clients = DEFAULT_CLIENTS if clients is None else clients
        if beta is not None:
            beta = _positive_number(beta, "`beta`")
        client = federation.assign(labels, n_clients, beta, r_partition)
        partition = Partition.IID if beta is None else Partition.DIRICHLET

    if not isinstance(holdout, int | float) or isinstance(holdout, bool):
        raise UsageError(f"`holdout` must be a number in [0, 1). Found {holdout!r}.")
    held = federation.holdout_mask(data.rows, holdout, r_split)
    fit_rows = ~held if held.any() else np.ones(data.rows, bool)
    eval_rows = held if held.any() else fit_rows
    y_fit, c_fit, x_fit = labels[fit_rows], client[fit_rows], x[fit_rows]
    c = data.n_classes

    dp = None
    if epsilon is not None:
        delta = DEFAULT_DELTA if delta is None else delta
        if delta >= 1 / n_clients:
            warnings.warn(
                f"δ = {delta:g} is not small against 1/K = {1 / n_clients:g}: a (ε, δ) guarantee "
                "allows one client in 1/δ to be exposed.",
                stacklevel=2,
            )
        if method.is_binning:
            cp, cn = _clip_pair(clip, pooled)
            hists = 2 if pooled else 2 * c
            what = "2 class-pooled histograms" if pooled else f"2c = {hists} histograms"
            dp = dp_statement(
                epsilon,
                delta,
                releases=hists,
                clip={"positive": cp, "negative": cn},
                rounds=rounds,
                participation=participation,
                per_round=hists,
                composition=f"one noisy sum of every sampled client's {what}, each client "
                f"counted once however many of the {rounds} rounds sample it (secure "
                "aggregation across rounds, unmasked once)",
            )
        else:
            ct = DEFAULT_TEMPERATURE_CLIP if clip is None else _positive_number(clip, "`clip`")
            r = federation.max_client_rounds(n_clients, rounds, participation)
            check = bool(held.any())
            clips = {"temperature": ct}
            if check:
                clips["evaluation"] = DEFAULT_EVALUATION_CLIP
            dp = dp_statement(
                epsilon,
                delta,
                releases=r + int(check),
                clip=clips,
                rounds=rounds,
                participation=participation,
                per_round=1,
                composition=f"1 per round; cohorts of m = "
                f"{federation.cohort_size(n_clients, participation)} drawn without replacement "
                f"across rounds, so a client is in at most r = {r} of the {rounds} rounds"
                + (", plus 1 held-out NLL check" if check else ""),
            )

    if dp is not None:
        clip_used = dict(dp.clip)
    elif clip is None:
        clip_used = None
    elif method.is_binning:
        clip_used = dict(zip(("positive", "negative"), _clip_pair(clip), strict=True))
    else:
        clip_used = {"temperature": _positive_number(clip, "`clip`")}

    fit: BinningFit | TemperatureFit
    if method.is_binning:
        assert n_bins is not None  # binning methods set it with their checks above
        p_fit = x_fit if kind is InputKind.PROBS else softmax(x_fit)
        fit = fed_binning(
            p_fit,
            y_fit,
            c_fit,
            n_clients,
            n_bins=n_bins,
            bbq=method is Method.FEDBBQ,
            weighted=weighted,
            rounds=rounds,
            participation=participation,
            participation_rng=r_rounds,
            noise_rng=r_noise,
            dp=dp,
            clip=None if clip_used is None else (clip_used["positive"], clip_used["negative"]),
            pooled=pooled,
            per_client=per_client,
        )
    else:
        z_fit = x_fit if kind is InputKind.LOGITS else np.log(np.maximum(x_fit, LOG_FLOOR))
        fit = fed_temperature(
            z_fit,
            y_fit,
            c_fit,
            n_clients,
            rounds=rounds,
            participation=participation,
            participation_rng=r_rounds,
            noise_rng=r_noise,
            dp=dp,
            clip=None if clip_used is None else clip_used["temperature"],
            server_lr=server_lr,
            per_client=per_client,
        )
    y_eval = labels[eval_rows]
    calibrator = fit.calibrator
    safeguard = None
    if isinstance(fit.calibrator, TemperatureCalibrator) and held.any():
        z_eval = (
            x[eval_rows]
            if kind is InputKind.LOGITS
            else np.log(np.maximum(x[eval_rows], LOG_FLOOR))
        )
        safeguard = check_temperature(
            z_eval,
            y_eval,
            client[eval_rows],
            n_clients,
            fit.calibrator.temperature,
            dp=dp,
            noise_rng=r_noise,
        )
        calibrator = TemperatureCalibrator(safeguard.released)
    before = measure(base_probs(eval_rows), y_eval, ece_bins)
    after = measure(calibrated_probs(calibrator, kind, x[eval_rows]), y_eval, ece_bins)
    return MulticlassResult(
        method=method,
        weighted=weighted if method.is_binning else None,
        calibrator=calibrator,
        input_kind=kind,
        n_classes=c,
        bins=n_bins,
        rounds=rounds,
        participation=participation,
        clients=n_clients,
        partition=partition,
        beta=beta,
        server_lr=server_lr,
        privacy=dp,
        clip=clip_used,
        before=before,
        after=after,
        ece_bins=ece_bins,
        rows=data.rows,
        fit_rows=int(fit_rows.sum()),
        eval_rows=int(eval_rows.sum()),
        in_sample=not held.any(),
        seed=seed_used,
        seeded=seed is not None,
        columns=columns,
        per_client=per_client,
        fit=fit,
        pooled=pooled,
        safeguard=safeguard,
        eval_mask=eval_rows,
    )


def calibrate_multiclass(
    y_true,
    *,
    probs=None,
    logits=None,
    client_ids=None,
    method: Method | str,
    **options,
) -> MulticlassResult:
    """Federated multiclass calibration of in-memory arrays: labels (n,) in 0..c−1, `probs`
    and/or `logits` (n, c), optional client ids; options as for `calibrate_multiclass_file`."""
    data = multiclass_from_arrays(y_true, probs=probs, logits=logits, client_ids=client_ids)
    return calibrate_multiclass_data(data, method=method, **options)


def calibrate_multiclass_file(
    source: str | os.PathLike,
    *,
    method: Method | str,
    rounds: int = DEFAULT_ROUNDS,
    participation: float | None = None,
    clients: int | None = None,
    beta: float | None = None,
    client_col: str | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    clip: float | tuple[float, float] | None = None,
    bins: int | None = None,
    weighted: bool = True,
    holdout: float = DEFAULT_HOLDOUT,
    ece_bins: int = DEFAULT_ECE_BINS,
    server_lr: float | None = None,
    input_kind: InputKind | str | None = None,
    label_col: str = "label",
    prob_prefix: str = "prob_",
    logit_prefix: str = "logit_",
    seed: int | np.random.Generator | None = None,
    per_client: bool = False,
    pooled: bool | None = None,
) -> MulticlassResult:
    """Read a multiclass table (Parquet, CSV or '-') and simulate federated calibration.

    - `method`: "fedbin", "fedbbq" (one-vs-all binning, algorithm 1) or "fedtemp" (temperature
      scaling by federated averaging, algorithm 2).
    - clients: `client_col` (an existing id column), else `clients` (default 100) spread
      IID, or with Dirichlet(`beta`) label skew when `beta` is given (appendix A.2).
    - `rounds` T and `participation` p: each round takes a cohort of round(p·K) clients, drawn
      without replacement across rounds (default 0.1, the paper's; 1 for FedTemp under DP).
    - `epsilon` (with `delta`, default 1e-5): user-level (ε, δ)-DP per client by clipping and
      Gaussian noise on the secure sum, zCDP-accounted over rounds and classes (appendix B.1).
      `clip`: C for fedtemp (default 0.5); (C₊, C₋) or one C for both for binning (default
      (10, 50)); without `epsilon` it clips without noise.
    - `bins`: B fixed-width bins (a power of two for fedbbq; default 128, 32 under DP);
      `weighted`: the heterogeneity weighting α_j without DP, the per-bin shrinkage towards the
      identity under DP (binning; default on); `pooled`: one map shared by the classes from
      the class-summed histograms (default: under DP only — 2 releases instead of 2c).
    - `holdout`: share of each client's rows (a uniform split of rows) held out, not used to
      fit: FedTemp's held-out check (DP under DP) runs on them, and the simulation measures
      cwECE, top-label ECE (`ece_bins` bins) and accuracy before and after on them (0: no
      check, measured in-sample). Default 0.2.
    - `server_lr`: fedtemp's server step η in log T (default: without DP the running
      curvature-weighted mean over rounds; under DP η = 1 for the first half of the rounds,
      then the mean of the later rounds' proposals).
    - `input_kind`: "probs" or "logits" (default: probs for binning, logits for fedtemp, the
      other if those columns are absent).
    - `seed`: a reproducible simulation, NOT private (anyone with the seed can regenerate the
      noise); without it the noise comes from the OS CSPRNG and no seed is published.
    - `per_client`: the per-client reference path (slow; same result).
    """
    spec = ColumnSpec(label_col, prob_prefix, logit_prefix, client_col)
    data = read_multiclass(source, spec, need=_input_kind(input_kind))
    return calibrate_multiclass_data(
        data,
        method=method,
        rounds=rounds,
        participation=participation,
        clients=clients,
        beta=beta,
        epsilon=epsilon,
        delta=delta,
        clip=clip,
        bins=bins,
        weighted=weighted,
        holdout=holdout,
        ece_bins=ece_bins,
        server_lr=server_lr,
        input_kind=input_kind,
        columns=spec,
        seed=seed,
        per_client=per_client,
        pooled=pooled,
    )


# --- reporting -----------------------------------------------------------------------------------


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
    import fedeval

    r = result
    run: dict[str, Any] = {
        "path": "per-client" if r.per_client else "fast",
        "reproducible_simulation": r.seeded,
    }
    if r.seed is not None:
        run["seed"] = r.seed
    return {
        "schema": SCHEMA,
        "fedeval_version": fedeval.__version__,
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


def render_multiclass_table(
    result: MulticlassResult, console: Console, *, source: str | None = None
) -> None:
    """Human-readable summary: setting, privacy claim, metrics before/after, the calibrator."""
    r = result
    name = escape(source or "data")
    if r.partition is Partition.DIRICHLET:
        skew = f"Dirichlet β = {r.beta:g}"
    else:
        skew = "IID" if r.partition is Partition.IID else "client column"
    console.print(
        f"[bold]{name}[/bold]: {r.rows:,} rows, {r.n_classes} classes, {r.clients:,} clients "
        f"({skew}) · [bold]{r.name}[/bold] on {r.input_kind.value} · T = {r.rounds} rounds, "
        f"p = {r.participation:g}",
        soft_wrap=True,
    )
    claim = r.mechanism.guarantee()
    style = "bold red" if r.seeded and r.privacy is not None else "dim"
    console.print(f"[{style}]{escape(claim)}[/{style}]", soft_wrap=True)
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("metric", "before", "after", "change"):
        t.add_column(col, justify="right" if col != "metric" else "left")
    rows = (
        (f"classwise ECE % ({r.ece_bins} bins)", r.before.cw_ece, r.after.cw_ece, 100),
        (
            f"top-label ECE % ({r.ece_bins} bins)",
            r.before.top_label_ece,
            r.after.top_label_ece,
            100,
        ),
        ("accuracy %", r.before.accuracy, r.after.accuracy, 100),
    )
    for label, b, a, scale in rows:
        t.add_row(label, f"{scale * b:.3f}", f"{scale * a:.3f}", f"{scale * (a - b):+.3f}")
    console.print(t)
    if isinstance(r.calibrator, TemperatureCalibrator):
        console.print(f"temperature T = {r.calibrator.temperature:.4f}")
        g = r.safeguard
        if g is not None:
            how = "DP estimate" if r.privacy is not None else "exact"
            line = (
                f"held-out check ({how}): NLL gain {g.gain:+.4f} {g.unit}"
                + (f" ± {g.sd:.4f} (noise SD)" if g.sd else "")
                + f" for the fitted T = {g.fitted:.4f}"
            )
            if g.kept:
                console.print(f"{line} → kept", soft_wrap=True)
            else:
                console.print(
                    f"[bold red]{line} → no gain shown: the map holds T = 1 (the model's own "
                    "probabilities)[/bold red]",
                    soft_wrap=True,
                )
    else:
        cal = r.calibrator
        if cal.bin_weights is not None:
            w = cal.weights()
            pooled = "one map for every class (pooled histograms); " if r.pooled else ""
            console.print(
                f"{r.bins} bins; {pooled}weight of the binning against the identity, after the "
                f"DP shrinkage: mean {w.mean():.2f}, max {w.max():.2f} (bin 0 kept as is)",
                soft_wrap=True,
            )
        else:
            alpha = ", ".join(f"{a:.2f}" for a in cal.alpha)
            console.print(f"{r.bins} bins per class; weights α_j = [{alpha}]", soft_wrap=True)
    if not r.method.order_preserving:
        console.print(
            "[yellow]binning is not order-preserving: it can change top-1 predictions (and "
            "accuracy), more so with many classes and few examples per bin[/yellow]",
            soft_wrap=True,
        )
    where = "in-sample" if r.in_sample else f"on {r.eval_rows:,} held-out rows"
    warn = ""
    if r.accuracy_change < 0:
        warn = f" · [bold red]accuracy falls by {-100 * r.accuracy_change:.2f} points[/bold red]"
    foot = f"exact metrics {where}{warn}"
    if r.privacy is not None:
        foot += " (not in the map file: under DP it holds no exact value)"
    if r.seed is not None:
        foot += f" · seed {r.seed}"
    console.print(f"[dim]{foot}[/dim]", soft_wrap=True)
