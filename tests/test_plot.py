"""Figures: ROC/PR curves and reliability diagrams, written atomically as PNG or SVG."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from importlib.util import find_spec

import numpy as np
import pytest

from fedeval.api.calibrate import calibrate
from fedeval.api.curves import roc_pr_curves
from fedeval.core.errors import UsageError
from fedeval.estimate.calibration import ece_from_histogram
from fedeval.views import plots as plot

# matplotlib is a dev dependency: if it is missing, the suite must fail here, not skip.
assert find_spec("matplotlib") is not None, "install the dev extras: pip install -e '.[dev]'"

N = 5_000
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _data(n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.clip(0.3 * y + 0.7 * rng.random(n), 0.0, 1.0)
    return y, s


@pytest.fixture(scope="module")
def curves():
    y, s = _data()
    return roc_pr_curves(y, s, model="distdp", epsilon=1.0, quantiles=32, seed=3)


@pytest.fixture(scope="module")
def calibration():
    y, s = _data()
    return calibrate(y, s, model="distdp", epsilon=1.0, seed=3)


def _texts(fig) -> list[str]:
    """Every string drawn on the figure: suptitle, titles, labels, legend entries."""
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def _svg_text(path) -> str:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    return " ".join(t for t in root.itertext())


def test_curves_png(tmp_path, curves):
    out = tmp_path / "curves.png"
    plot.plot_curves(curves, out)
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 10_000  # a drawn figure, not an empty canvas
    assert [p.name for p in tmp_path.iterdir()] == ["curves.png"]  # no temporary file left


def test_curves_svg_is_xml_with_the_setting_in_its_text(tmp_path, curves):
    out = tmp_path / "curves.SVG"  # the suffix is case-insensitive
    plot.plot_curves(curves, out)
    assert "<svg" in out.read_text()
    text = _svg_text(out)
    assert "distdp, ε = 1" in text
    assert f"{N:,} examples" in text
    assert f"AUC {curves.roc_auc.estimate:.4f}" in text


def test_curves_figure_title_legends_and_data(curves):
    fig = plot.curves_figure(curves)
    title = fig.get_suptitle()
    assert title.startswith("distdp, ε = 1 · ")
    assert f"h = {curves.run.config.height}" in title
    assert "Q = 32" in title
    texts = _texts(fig)
    assert f"estimate (AUC {curves.roc_auc.estimate:.4f})" in texts
    assert f"exact (AUC {curves.roc_auc.exact:.4f})" in texts
    assert f"estimate (AP {curves.average_precision.estimate:.4f})" in texts
    assert f"area error {curves.roc_area_error:.1e}" in texts
    assert f"area error {curves.pr_area_error:.1e}" in texts
    roc, pr = fig.axes
    assert roc.get_xlabel() == "False positive rate"
    assert pr.get_ylabel() == "Precision"
    # the estimate drawn is the dense curve; the PR baseline is the released prevalence
    (est,) = [ln for ln in roc.get_lines() if ln.get_label().startswith("estimate")]
    np.testing.assert_array_equal(est.get_xdata(), curves.dense.fpr)
    hist = curves.run.histogram
    (base,) = [ln for ln in pr.get_lines() if ln.get_label().startswith("prevalence")]
    assert base.get_ydata()[0] == pytest.approx(hist.positives / (hist.positives + hist.negatives))


def test_curves_without_exact_have_no_exact_line():
    y, s = _data()
    c = roc_pr_curves(y, s, model="federated", quantiles=16, exact=False, seed=1)
    texts = _texts(plot.curves_figure(c))
    assert not any(t.startswith(("exact", "area error")) for t in texts)
    assert any(t.startswith("federated · ") for t in texts)
    assert not any("ε" in t for t in texts)


def test_reliability_png_and_svg(tmp_path, calibration):
    png, svg = tmp_path / "rel.png", tmp_path / "rel.svg"
    plot.plot_reliability(calibration, png)
    plot.plot_reliability(calibration, svg)
    assert png.read_bytes().startswith(PNG_MAGIC)
    text = _svg_text(svg)
    assert "distdp" in text
    assert f"binning B = {len(calibration.map.values)}" in text


def test_reliability_figure_points_and_legend(calibration):
    fig = plot.reliability_figure(calibration)
    texts = _texts(fig)
    raw, cal = calibration.ece_raw, calibration.ece_calibrated
    assert f"raw scores · ECE {raw.estimate:.4f} [exact {raw.exact:.4f}]" in texts
    assert f"calibrated · ECE {cal.estimate:.4f} [exact {cal.exact:.4f}], in-sample" in texts
    assert fig.get_suptitle().startswith("distdp, ε = 1 · ")
    main, below = fig.axes
    assert below.get_shared_x_axes().joined(main, below)
    leaves = calibration.run.histogram.leaves
    n_leaves = leaves.shape[-1]
    x, _ = plot.reliability_points(leaves, (np.arange(n_leaves) + 0.5) / n_leaves, 15)
    (line,) = [ln for ln in main.get_lines() if ln.get_label().startswith("raw")]
    np.testing.assert_allclose(line.get_xdata(), x)


def test_reliability_points_sum_to_the_ece():
    """Without noise, the raw points are the bins `ece_from_histogram` sums over: weighted by
    their mass, the gaps between mean score and fraction of positives add up to its ECE."""
    y, s = _data()
    leaves = calibrate(y, s, model="federated", seed=0).run.histogram.leaves
    mid = (np.arange(leaves.shape[-1]) + 0.5) / leaves.shape[-1]
    x, frac = plot.reliability_points(leaves, mid, 10)
    mass = np.bincount(np.minimum((mid * 10).astype(int), 9), leaves.sum(axis=0), minlength=10)
    mass = mass[mass > 0]
    assert len(x) == len(mass) and np.all(np.diff(x) > 0)
    ece = np.sum(mass * np.abs(frac - x)) / leaves.sum()
    assert ece == pytest.approx(ece_from_histogram(leaves, 10), rel=1e-12)
    assert ece > 0.01  # these scores are far from calibrated: the check is not trivially 0 = 0


def test_reliability_bbq_and_non_probability_scores():
    y, s = _data()
    cal = calibrate(y, 10 * s - 5, model="federated", score_range=(-5.0, 5.0), method="bbq", seed=2)
    assert cal.ece_raw is None
    fig = plot.reliability_figure(cal)
    texts = _texts(fig)
    assert not any(t.startswith("raw scores") for t in texts)
    assert " · bbq · " in fig.get_suptitle()
    assert "[-5, 5]" in fig.axes[1].get_xlabel()


def test_describe_setting(curves):
    run = curves.run
    h = run.config.height
    assert plot.describe_setting(run) == f"distdp, ε = 1 · hierarchy h = {h} · 5,000 examples"
    y, s = _data(1_000)
    c = roc_pr_curves(
        y, s, model="federated", client_ids=np.arange(1_000) % 40, quantiles=8, seed=0
    )
    assert plot.describe_setting(c.run, "Q = 8").endswith("· Q = 8 · 1,000 examples, 40 clients")


@pytest.mark.parametrize("name", ["curves.pdf", "curves", "curves.png.txt"])
def test_unsupported_suffix(tmp_path, curves, name):
    with pytest.raises(UsageError, match=r"\.png or \.svg"):
        plot.plot_curves(curves, tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_failed_save_leaves_no_file(tmp_path, monkeypatch, curves, calibration):
    from matplotlib.figure import Figure

    def boom(self, *args, **kwargs):
        args[0].write(b"partial")
        raise RuntimeError("disk full")

    monkeypatch.setattr(Figure, "savefig", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        plot.plot_curves(curves, tmp_path / "c.png")
    with pytest.raises(RuntimeError, match="disk full"):
        plot.plot_reliability(calibration, tmp_path / "r.svg")
    assert list(tmp_path.iterdir()) == []


def test_failed_save_keeps_the_old_file(tmp_path, monkeypatch, curves):
    from matplotlib.figure import Figure

    out = tmp_path / "c.png"
    out.write_bytes(b"old")
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        plot.plot_curves(curves, out)
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["c.png"]


def test_missing_matplotlib(tmp_path, monkeypatch, curves, calibration):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(UsageError, match=r"pip install matplotlib"):
        plot.plot_curves(curves, tmp_path / "c.png")
    with pytest.raises(UsageError, match="plotting needs matplotlib"):
        plot.plot_reliability(calibration, tmp_path / "r.svg")
    assert list(tmp_path.iterdir()) == []


def test_importing_fedeval_does_not_import_matplotlib():
    import subprocess

    code = "import sys, fedeval, fedeval.views.plots; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pyplot_backend_untouched(tmp_path, curves):
    """Drawing goes through Figure, not pyplot: no pyplot import, no figure left open."""
    import matplotlib

    backend = matplotlib.rcParams._get_backend_or_none()
    had_pyplot = "matplotlib.pyplot" in sys.modules
    plot.plot_curves(curves, tmp_path / "c.png")
    assert matplotlib.rcParams._get_backend_or_none() == backend
    assert ("matplotlib.pyplot" in sys.modules) == had_pyplot


def test_thin_keeps_the_ends_and_the_shape():
    x = np.linspace(0, 1, 100_001)
    y = np.sqrt(x)
    tx, ty = plot._thin(x, y, n=500)
    assert 500 <= len(tx) <= 1_100
    assert (tx[0], ty[0], tx[-1], ty[-1]) == (0.0, 0.0, 1.0, 1.0)
    assert np.max(np.abs(np.interp(x, tx, ty) - y)) < 5e-3
    short = np.linspace(0, 1, 10)
    np.testing.assert_array_equal(plot._thin(short, short, n=500)[0], short)
