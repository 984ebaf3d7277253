"""Binning under DP without the heterogeneity weighting (`--unweighted`): bin 0 (p < 1/B) is
neither sent nor calibrated, so the map keeps the input probability there, as the weighted
method does. Its released sum is noise alone: read as a frequency it maps p < 1/B to 0, 1 or
anything between (found by the leak scan: the value of bin 0 looked like a function of the
data; it is a function of the noise)."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval.multiclass.binning import NEGATIVE, POSITIVE, fit_from_histograms


@pytest.mark.parametrize("bbq", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_bin_zero_keeps_the_input_probability_under_dp(bbq, weighted):
    bins = 8
    hist = np.zeros((1, 2, bins))
    hist[0, POSITIVE] = [0.7, 1, 2, 4, 8, 16, 30, 60]  # bin 0: noise alone, here positive
    hist[0, NEGATIVE] = [-0.4, 60, 30, 16, 8, 4, 2, 1]  # and negative: its frequency reads 1
    fit = fit_from_histograms(
        hist, bbq=bbq, weighted=weighted, sigma=(0.5, 0.5), n_classes=3,
        totals=np.array([300.0]),
    )  # fmt: skip
    probs = np.array([[0.98, 0.01, 0.01], [0.05, 0.9, 0.05]])
    out = fit.calibrator(probs)
    # Classes in bin 0 keep their input probability before renormalising: they stay tiny.
    assert out[0, 1] == pytest.approx(out[0, 2])
    assert out[0, 1] < 0.05 and out[1, 0] < 0.1 and out[1, 2] < 0.1, out
    assert fit.calibrator.weights()[:, 0].tolist() == [0.0, 0.0, 0.0]


def test_without_dp_unweighted_binning_calibrates_every_bin():
    hist = np.zeros((1, 2, 4))
    hist[0, POSITIVE] = [3, 1, 2, 9]
    hist[0, NEGATIVE] = [1, 9, 2, 1]
    fit = fit_from_histograms(hist, bbq=False, weighted=False, n_classes=2)
    assert fit.calibrator.weights().min() == 1.0
    assert fit.calibrator.values[0, 0] == pytest.approx(0.75)
