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
from typing import TypedDict, Unpack

import numpy as np
from numpy.typing import ArrayLike

from fedeval.core.config import one_of
from fedeval.core.errors import UsageError
from fedeval.multiclass import federation
from fedeval.multiclass.binning import BinningFit, fed_binning
from fedeval.multiclass.data import (
    LOG_FLOOR,
    ColumnSpec,
    InputKind,
    MulticlassData,
    multiclass_from_arrays,
    read_multiclass,
    softmax,
)
from fedeval.multiclass.denoise import NoisyBinning
from fedeval.multiclass.maps import (
    apply_multiclass_map_file,
    calibrated_probs,
    shareable_map,
)
from fedeval.multiclass.metrics import DEFAULT_ECE_BINS, measure
from fedeval.multiclass.privacy import (
    DEFAULT_NEGATIVE_CLIP,
    DEFAULT_POOLED_CLIP,
    DEFAULT_POSITIVE_CLIP,
    DEFAULT_TEMPERATURE_CLIP,
)
from fedeval.multiclass.result import (
    DEFAULT_BINS,
    DEFAULT_CLIENTS,
    DEFAULT_COLUMNS,
    DEFAULT_DELTA,
    DEFAULT_DP_BINS,
    DEFAULT_HOLDOUT,
    DEFAULT_PARTICIPATION,
    DEFAULT_ROUNDS,
    DP_TEMPERATURE_PARTICIPATION,
    MAX_BINS,
    Method,
    MulticlassResult,
    Partition,
)
from fedeval.multiclass.temperature import (
    DEFAULT_EVALUATION_CLIP,
    Safeguard,
    TemperatureCalibrator,
    TemperatureFit,
    check_temperature,
    fed_temperature,
)
from fedeval.privacy.gaussian import dp_statement
from fedeval.protocol.simulate import rng_and_seed

__all__ = [
    "Method",
    "MulticlassResult",
    "Partition",
    "apply_multiclass_map_file",
    "calibrate_multiclass",
    "calibrate_multiclass_data",
    "calibrate_multiclass_file",
    "shareable_map",
]


def _input_kind(kind: InputKind | str | None) -> InputKind | None:
    return None if kind is None else _input_kind_given(kind)


def _input_kind_given(kind: InputKind | str) -> InputKind:
    try:
        return InputKind(kind)
    except ValueError:
        raise UsageError(f"`input` takes probs or logits. Found {kind!r}.") from None


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


class MulticlassKeywords(TypedDict, total=False):
    """The options of `calibrate_multiclass_data` that the array and file entry points pass on
    as they are (`**options`; their defaults and meaning: `calibrate_multiclass_file`)."""

    rounds: int
    participation: float | None
    clients: int | None
    beta: float | None
    epsilon: float | None
    delta: float | None
    clip: float | tuple[float, float] | None
    bins: int | None
    weighted: bool
    holdout: float
    ece_bins: int
    server_lr: float | None
    seed: int | np.random.Generator | None
    per_client: bool
    pooled: bool | None


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
    method = one_of(Method, method, "method")
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
    safeguard: Safeguard | NoisyBinning | None = None
    if isinstance(fit, BinningFit):
        safeguard = fit.check  # binning under DP: the release's own check (None otherwise)
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
    y_true: ArrayLike,
    *,
    probs: ArrayLike | None = None,
    logits: ArrayLike | None = None,
    client_ids: ArrayLike | None = None,
    method: Method | str,
    input_kind: InputKind | str | None = None,
    **options: Unpack[MulticlassKeywords],
) -> MulticlassResult:
    """Federated multiclass calibration of in-memory arrays: labels (n,) in 0..c−1, `probs`
    and/or `logits` (n, c), optional client ids; options as for `calibrate_multiclass_file`."""
    data = multiclass_from_arrays(y_true, probs=probs, logits=logits, client_ids=client_ids)
    return calibrate_multiclass_data(data, method=method, input_kind=input_kind, **options)


def calibrate_multiclass_file(
    source: str | os.PathLike[str],
    *,
    method: Method | str,
    client_col: str | None = None,
    input_kind: InputKind | str | None = None,
    label_col: str = "label",
    prob_prefix: str = "prob_",
    logit_prefix: str = "logit_",
    **options: Unpack[MulticlassKeywords],
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
        data, method=method, input_kind=input_kind, columns=spec, **options
    )


# --- reporting -----------------------------------------------------------------------------------
