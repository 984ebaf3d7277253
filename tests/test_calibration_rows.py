"""Calibrate's interval refits every noise draw's map at once: the batched isotonic fit, edges,
counts and noisy-map check give each row what the one-release functions give it (issue 28)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

import fedeval
import fedeval.api.calibrate as calibrate_api
from fedeval.core.hierarchy import equidepth_edges
from fedeval.estimate.calibration import (
    TINY_WEIGHT,
    bbq,
    bbq_bucket_range,
    bbq_maps,
    check_noisy_map,
    checks_kept,
    ece_from_histogram,
    histogram_binning,
    histogram_binning_maps,
)
from fedeval.estimate.calibration_rows import (
    equidepth_edges_rows,
    isotonic_rows,
    searchsorted_rows,
)


def _pava_cases(rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, y (R, n), w (R, n)) for every shape of input the fit meets."""
    r, n = 40, 37
    ones = np.ones((r, n))
    rand = rng.normal(size=(r, n))
    tied = rng.integers(0, 4, (r, n)).astype(float)
    mono = np.sort(rand, axis=-1)
    heavy = rng.random((r, n)) * 10.0 ** rng.integers(-9, 6, (r, n))  # TINY_WEIGHT to 1e5
    return [
        ("random", rand, ones),
        ("tied", tied, ones),
        ("monotone", mono, ones),
        ("reversed", mono[:, ::-1].copy(), ones),
        ("constant", np.full((r, n), 0.5), ones),
        ("weighted", rng.random((r, n)), heavy),
        ("weighted tied", tied, heavy),
        ("weighted reversed", mono[:, ::-1].copy(), heavy),
        ("one bucket", rand[:, :1], heavy[:, :1]),
        ("two buckets", rand[:, :2], heavy[:, :2]),
    ]


@pytest.mark.parametrize("case", range(10))
def test_batched_isotonic_fit_is_scipys_per_row(case):
    name, y, w = _pava_cases(np.random.default_rng(28))[case]
    got = isotonic_rows(y, w)
    want = np.array([isotonic_regression(a, weights=b).x for a, b in zip(y, w, strict=True)])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=name)
    assert np.all(np.diff(got, axis=-1) >= 0), name


def test_batched_search_is_numpys_per_row():
    rng = np.random.default_rng(5)
    a = np.sort(rng.integers(0, 9, (30, 17)), axis=-1).astype(float)  # ties, repeats
    v = rng.integers(-1, 11, (30, 6)).astype(float)
    want = np.array([np.searchsorted(a[i], v[i], side="left") for i in range(30)])
    assert np.array_equal(searchsorted_rows(a, v), want)


def _noisy_stack(rows: int, n_leaves: int, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Leaves (rows, 2, L) of a miscalibrated model with Gaussian noise of SD `sd` per leaf."""
    mids = (np.arange(n_leaves) + 0.5) / n_leaves
    mass = rng.poisson(40.0, n_leaves)
    pos = rng.binomial(mass, mids**2)
    clean = np.stack([mass - pos, pos]).astype(float)
    return clean + rng.normal(0.0, sd, (rows, 2, n_leaves))


@pytest.mark.parametrize("n_buckets", [1, 2, 9, 31])
def test_batched_binning_is_the_one_release_binning(n_buckets):
    stack = _noisy_stack(12, 64, 6.0, np.random.default_rng(n_buckets))
    stack[3] = 0.0  # an empty release: edges by linspace, every bucket at rate 1/2
    maps = histogram_binning_maps(stack, n_buckets)
    edges = equidepth_edges_rows(stack[:, 0] + stack[:, 1], n_buckets)
    for x, m, e in zip(stack, maps, edges, strict=True):
        ref = histogram_binning(x, n_buckets)
        assert np.array_equal(m.edges, ref.edges) and np.array_equal(e, ref.edges)
        assert np.array_equal(m.mass, ref.mass)
        np.testing.assert_allclose(m.values, ref.values, rtol=0, atol=1e-12)
        assert np.array_equal(equidepth_edges(x[0] + x[1], n_buckets), e)
    assert TINY_WEIGHT > 0


def test_batched_bbq_is_the_one_release_bbq_bit_for_bit():
    # Totals from ~0 to 64·40·20: the rows fall into several ranges of B, fitted group by group.
    rng = np.random.default_rng(7)
    stack = _noisy_stack(12, 128, 5.0, rng) * np.geomspace(0.01, 20.0, 12)[:, None, None]
    stack[5] = 0.0
    ranges = {tuple(bbq_bucket_range(float(p.sum()), 128)) for p in stack[:, 0] + stack[:, 1]}
    assert len(ranges) >= 3
    for x, m in zip(stack, bbq_maps(stack), strict=True):
        ref = bbq(x)
        assert np.array_equal(m.edges, ref.edges)
        assert np.array_equal(m.values, ref.values)
        assert np.array_equal(m.mass, ref.mass)


@pytest.mark.parametrize("method", ["binning", "bbq"])
def test_batched_check_keeps_what_the_one_release_check_keeps(method):
    # Noise from small (maps kept) to swamping (maps dropped): both verdicts must occur, and
    # every row's must be the one-release check's.
    rng = np.random.default_rng(11)
    n_leaves = 64
    leaf_scores = (np.arange(n_leaves) + 0.5) / n_leaves
    stack = np.concatenate([_noisy_stack(8, n_leaves, sd, rng) for sd in (0.5, 4.0, 15.0, 40.0)])
    draws = (
        rng.normal(0.0, 1.0, (60, 2, n_leaves))
        * np.repeat([0.5, 4.0, 15.0, 40.0], 15)[:, None, None]
    )
    sums = np.cumsum(draws, axis=-1)
    want, maps, check_edges = [], [], []
    for x in stack:
        m = histogram_binning(x, 8) if method == "binning" else bbq(x)
        e = None if method == "binning" else equidepth_edges(x[0] + x[1], 8)
        maps.append(m)
        check_edges.append(e)
        want.append(check_noisy_map(m, x, draws, leaf_scores, e)[1].kept)
    if method == "binning":
        edges = np.stack([m.edges for m in maps])
        got = checks_kept(
            stack, draws, leaf_scores, edges, np.stack([m.values for m in maps]), sums
        )
    else:
        got = checks_kept(stack, draws, leaf_scores, np.stack(check_edges), None, sums)
    assert 0 < sum(want) < len(want)
    assert got.tolist() == want


@pytest.mark.parametrize("method", ["binning", "bbq"])
@pytest.mark.parametrize("model", ["distdp", "localdp"])
def test_interval_draws_are_the_per_draw_refits(method, model, monkeypatch):
    # The ECE of every draw under its own refitted, checked map: the batched path against the
    # one-release functions applied draw by draw.
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 3000)
    s = np.clip(0.35 * y + 0.65 * rng.random(3000), 0.0, 1.0)
    seen = []
    real = calibrate_api.noise_sd
    monkeypatch.setattr(calibrate_api, "noise_sd", lambda x: seen.append(x) or real(x))
    r = fedeval.calibrate(y, s, model=model, method=method, seed=4)
    run = r.run
    leaves = run.histogram.leaves
    draws = run.noise_draws
    mids = run.axis.leaf_midpoints(leaves.shape[-1])
    b = calibrate_api.auto_buckets(
        run.config.model, run.size_for_tuning, run.config.epsilon, leaves.shape[-1]
    )
    want = []
    for x in leaves + draws[: calibrate_api.REFIT_DRAWS]:
        m = histogram_binning(x, b) if method == "binning" else bbq(x)
        e = None if method == "binning" else equidepth_edges(x[0] + x[1], b)
        want.append(ece_from_histogram(x, r.n_bins, check_noisy_map(m, x, draws, mids, e)[0]))
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], want, rtol=0, atol=1e-12)
