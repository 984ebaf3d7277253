"""Bounds on the release's size parameters live in the library: `height`, `buckets` and
`quantiles` are refused there, by name, whichever entry point (Python or CLI) passes them."""

import numpy as np
import pytest

import fedeval
from fedeval.core.config import (
    MAX_BUCKETS,
    MAX_HEIGHT,
    MAX_QUANTILES,
    PrivacyConfig,
    PrivacyModel,
    Shape,
    check_buckets,
    check_count,
    check_height,
    check_quantiles,
)
from fedeval.core.errors import UsageError


@pytest.fixture(scope="module")
def scored():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 2_000)
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1)
    return y, s


@pytest.mark.parametrize(
    ("check", "least", "most"),
    [
        (check_height, 1, MAX_HEIGHT),
        (check_buckets, 1, MAX_BUCKETS),
        (check_quantiles, 2, MAX_QUANTILES),
    ],
)
def test_bounds_are_inclusive_and_refused_one_past(check, least, most):
    assert check(least) == least
    assert check(most) == most
    assert check(np.int64(most)) == most  # numpy integers are integers
    for bad in (least - 1, most + 1, 10**30, -(10**30)):
        with pytest.raises(UsageError, match=f"from {least:,} to {most:,}"):
            check(bad)


@pytest.mark.parametrize("bad", [True, 2.0, "8", None, np.float64(4.0), [4]])
def test_non_integers_are_refused_with_the_value_found(bad):
    with pytest.raises(UsageError, match=r"`height` must be an integer .* Found"):
        check_height(bad)


def test_the_message_names_the_parameter_not_a_flag():
    with pytest.raises(UsageError) as e:
        check_count(7, "quantiles", 8, 9)
    assert str(e.value).startswith("`quantiles`")
    assert "--" not in str(e.value)


def test_privacy_config_refuses_a_height_beyond_the_bound():
    with pytest.raises(UsageError, match=f"`height` must be from 1 to {MAX_HEIGHT}"):
        PrivacyConfig(PrivacyModel.FEDERATED, MAX_HEIGHT + 1, Shape.FLAT)
    with pytest.raises(UsageError, match="`height` must be an integer"):
        PrivacyConfig(PrivacyModel.FEDERATED, 4.5, Shape.FLAT)  # type: ignore[arg-type]
    assert PrivacyConfig(PrivacyModel.FEDERATED, np.int64(3), Shape.FLAT).height == 3


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda y, s: fedeval.evaluate(y, s, height=50), "height"),
        (lambda y, s: fedeval.evaluate(y, s, height=0), "height"),
        (lambda y, s: fedeval.evaluate(y, s, buckets=MAX_BUCKETS + 1), "buckets"),
        (lambda y, s: fedeval.evaluate(y, s, buckets=2**40), "buckets"),
        (lambda y, s: fedeval.evaluate(y, s, quantiles=MAX_QUANTILES + 1), "quantiles"),
        (lambda y, s: fedeval.evaluate(y, s, quantiles=10**12), "quantiles"),
        (lambda y, s: fedeval.roc_pr_curves(y, s, quantiles=MAX_QUANTILES + 1), "quantiles"),
        (lambda y, s: fedeval.roc_pr_curves(y, s, height=MAX_HEIGHT + 1), "height"),
        (lambda y, s: fedeval.calibrate(y, s, buckets=MAX_BUCKETS + 1), "buckets"),
        (lambda y, s: fedeval.calibrate(y, s, height=50), "height"),
    ],
)
def test_library_calls_refuse_out_of_bound_sizes_by_name(scored, call, name):
    with pytest.raises(UsageError, match=f"^`{name}` must be from"):
        call(*scored)


def test_sizes_within_the_bounds_are_accepted(scored):
    y, s = scored
    # federated: the bounds are under test, not 200 noise draws over 2^20 leaves per level
    ev = fedeval.evaluate(y, s, model="federated", height=MAX_HEIGHT, buckets=4096, quantiles=512)
    assert 0.5 < ev.auc.estimate <= 1.0
    cal = fedeval.calibrate(y, s, model="federated", buckets=64)
    assert 1 <= len(cal.map.values) <= 64


@pytest.mark.parametrize("height", [50, 0, "x", 2.5])
def test_a_bad_height_is_refused_before_the_file_is_read(height):
    # The reading resolution is checked first: a bad height is named even for a file that
    # does not exist (before, it was clamped and the whole file read before the refusal).
    import fedeval

    with pytest.raises(UsageError, match="`height`"):
        fedeval.evaluate_file("no-such-file.parquet", height=height)


def test_ci_draws_are_bounded_and_checked_before_the_file_is_read():
    from typer.testing import CliRunner

    import fedeval
    from fedeval.cli import app

    y = np.arange(200) % 2
    with pytest.raises(UsageError, match="`ci_draws` must be at most 10,000"):
        fedeval.evaluate(y, y * 0.5 + 0.25, model="federated", ci_draws=10**6)
    r = CliRunner().invoke(app, ["evaluate", "no-such-file.csv", "--ci-draws", "1000000"])
    assert r.exit_code == 2 and "--ci-draws must be at most" in r.stderr
