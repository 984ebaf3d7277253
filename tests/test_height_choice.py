"""`--height auto` under DP from the probe's noisy per-class histogram
(`fedeval.core.height_choice`, `fedeval.privacy.probe`): finer than the class-total rule where
the scores are coarse relative to the cells, the same where they are smooth over [0, 1], and a
probe whose claim states what it releases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fedeval
from fedeval.api.plan import plan_report
from fedeval.core.axis import ScoreAxis, threshold_axis
from fedeval.core.config import HEIGHT_METRICS, config_dict, config_from_dict
from fedeval.core.errors import UsageError
from fedeval.core.height_choice import (
    PROBE_LEVEL,
    choose_height,
    discretisation,
    level_values,
)
from fedeval.core.params import (
    AUTO_MIN_HEIGHT,
    probe_epsilon_per_example,
    probe_height,
    resolve_config,
)
from fedeval.core.spec import ReleaseSpec
from fedeval.privacy import probe
from fedeval.privacy.mechanism import Mechanism, mechanism_from_section
from fedeval.tables.scored import scored_from_arrays


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _family(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels, scores) of benchmarks/hard.py's families, drawn with a fixed seed."""
    rng = np.random.default_rng(0)
    if name == "smooth":
        y = rng.random(n) < 0.5
        return y, _sigmoid(rng.normal(np.where(y, 1.0, -1.0), 1.0))
    if name == "squeezed":
        y = rng.random(n) < 0.3
        return y, 0.45 + 0.1 * _sigmoid(rng.normal(np.where(y, 1.0, -1.0), 1.0))
    if name == "pointmass":  # 40% of rows on 8 scores, label ~ Bernoulli(score)
        rng = np.random.default_rng([2, 0])  # benchmarks/hard.py's pointmass draw 0
        y = rng.random(n) < 0.5
        s = _sigmoid(rng.normal(np.where(y, 1.0, -1.0), 1.0))
        on = rng.random(n) < 0.4
        s[on] = np.array([0.05, 0.2, 0.33, 0.5, 0.61, 0.75, 0.9, 0.97])[
            rng.integers(0, 8, on.sum())
        ]
        y[on] = rng.random(on.sum()) < s[on]
        return y, s
    if name == "lowrange":  # smooth scores squeezed into [0, 0.01] on the [0, 1] axis
        y = rng.random(n) < 0.2
        return y, 0.01 * _sigmoid(rng.normal(np.where(y, 1.0, -1.0), 1.0))
    y = rng.random(n) < 0.015  # rare: positives concentrated in the top cells
    return y, np.where(y, rng.beta(5.0, 2.0, n), rng.beta(1.0, 6.0, n))


def _heights(
    name: str, n: int, model: str, seeds=range(3), height_for: tuple[str, ...] = ()
) -> tuple[int, list[int]]:
    """(the class-total rule's height, the histogram rule's height for each probe seed), the
    height chosen for the metrics `height_for` names (all by default)."""
    y, s = _family(name, n)
    cfg = resolve_config(
        model, n=0, epsilon=1.0 if model == "distdp" else 5.0, height_for=height_for
    )
    level = PROBE_LEVEL[cfg.model]
    hist = np.zeros((2, 1 << level), np.int64)
    np.add.at(
        hist, (y.astype(int), np.minimum((s * (1 << level)).astype(int), (1 << level) - 1)), 1
    )
    old = probe_height(
        model,
        negatives=float((~y).sum()),
        positives=float(y.sum()),
        epsilon=probe_epsilon_per_example(cfg),
        reports=n,
    )
    new = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        if model == "distdp":
            found, total = probe.draw_distdp(hist, cfg, rng), 0
        else:
            found, total = probe.draw_localdp(hist, 0, level, cfg, rng)[0], n
        new.append(probe.height(found, cfg, total, 0, 16))
    return old, new


@pytest.mark.parametrize("model", ["distdp", "localdp"])
def test_squeezed_scores_get_a_finer_tree_than_class_totals_give(model):
    # 100k scores in [0.45, 0.55]: they fill 6–7 of 64 cells, so at the class-total rule's
    # height (distdp 6, localdp 5) the AUC's bias is 10× its smooth value
    # (benchmarks/height.py: 1.7e-3 at h = 6 against 2.4e-4 at 9).
    old, new = _heights("squeezed", 100_000, model)
    assert all(h >= old + 2 for h in new), (old, new)


@pytest.mark.parametrize(("model", "finest"), [("distdp", 12), ("localdp", 9)])
def test_data_the_probe_holds_in_one_cell_get_a_tree_that_divides_them(model, finest):
    # 100k scores in [0, 0.01] on the [0, 1] axis: one cell of the probe at every level, so
    # every step it reads is 0. Read as no bias, the choice went to the noise alone (distdp
    # h = 6, localdp 4), whose leaves hold every score in one: AUC 0.5 with [0, 1] against a
    # truth of 0.92. The pairs sharing that cell (all of them) are now the bias at the probe's
    # level, halved per level beyond it.
    old, new = _heights("lowrange", 100_000, model)
    assert all(h >= finest for h in new), (old, new)
    y, s = _family("lowrange", 100_000)
    ev = fedeval.evaluate(y.astype(int), s, model=model, seed=1)
    lo, hi = ev.auc.ci95
    assert lo <= ev.auc.exact <= hi and hi - lo < 0.1, (ev.config.height, ev.auc)


def test_rare_class_concentrated_at_the_top_gets_a_finer_tree_under_localdp():
    # 1M rows, 1.5% positives ~ Beta(5, 2) against Beta(1, 6) (the localdp case): the
    # class totals give h = 3, where the AUC's bias is 8× its noise.
    old, new = _heights("rare", 1_000_000, "localdp")
    assert old == 3
    assert all(h > old for h in new), new


@pytest.mark.parametrize(("model", "height"), [("distdp", 8), ("localdp", 6)])
def test_smooth_scores_keep_the_class_total_height(model, height):
    # Smooth binormal scores over [0, 1], 1M rows: the height the class totals gave (distdp 8,
    # whose AUC error meets the smooth target ≤ 2e-5; localdp 6), from the 64-cell and from the
    # 16-cell probe alike.
    old, new = _heights("smooth", 1_000_000, model)
    assert old == height and new == [height] * 3


@pytest.mark.parametrize("model", ["distdp", "localdp"])
def test_smooth_scores_are_never_read_coarser_than_their_class_totals_say(model):
    # 20,000 smooth rows: the histogram's noisy reading of the bias shows no finer step worth
    # its noise, and the geometric mean over AUC, AP and P/R/A then leans to the P/R/A floor:
    # under distdp h = 4 in 43 of 60 releases, with 3.4x the AUC error of the class totals'
    # h = 5. The histogram may only take the tree finer than the totals' height.
    old, new = _heights("smooth", 20_000, model, seeds=range(20))
    assert all(h >= old for h in new), (old, new)


def test_bias_prediction_follows_the_exact_bias_of_smooth_scores():
    # Exact per-class counts of smooth scores (no noise): the predicted AUC bias at h = 6 … 9
    # is the exact |AUC(h) − AUC(16)| within a factor 2 (the smooth regime's ¼ per level).
    y, s = _family("smooth", 1_000_000)
    fine = np.zeros((2, 1 << 16))
    np.add.at(fine, (y.astype(int), np.minimum((s * (1 << 16)).astype(int), (1 << 16) - 1)), 1)
    auc = level_values(fine)[0]
    probe_hist = fine.reshape(2, 64, -1).sum(axis=-1)
    heights = np.arange(6, 10)
    predicted = discretisation(probe_hist, 0.0, heights)[0]
    exact = np.abs(auc[heights] - auc[16])
    assert np.all((predicted > exact / 2) & (predicted < exact * 2)), (predicted, exact)


def _exact_and_predicted(
    name: str, n: int, cells: int, heights: np.ndarray, thresholds: tuple[float, ...] = ()
):
    """(exact |V(h) − V(16)| of AUC and AP, their prediction from exact `cells`-cell counts),
    the scores read as `evaluate --thresholds` reads them (the thresholds cell edges)."""
    y, s = _family(name, n)
    axis = threshold_axis((0.0, 1.0), thresholds) if thresholds else ScoreAxis.linear(0.0, 1.0)
    fine = scored_from_arrays(y, s, resolution=16, axis=axis).leaf_counts(16).astype(float)
    values = level_values(fine)
    exact = np.abs(values[:, heights] - values[:, 16:])
    return exact, discretisation(fine.reshape(2, cells, -1).sum(axis=-1), 0.0, heights)


def test_point_masses_read_no_auc_bias_the_finer_levels_do_not_have():
    # 40% of 100k rows on 8 scores (benchmarks/hard.py's pointmass, thresholds beside the
    # masses declared): the AUC's step from level 3 to 4 is large (masses and the smooth part
    # share cells), and once each mass has its own cell the steps stop: the exact
    # |AUC(h) − AUC(16)| is at most 8.6e-5 from h = 5 on. Carried up at ¼ per level past the
    # probe's own small readings of the later steps, that coarse step predicted 4.1e-4 at
    # h = 5; no reading of the probe allows more than twice the largest exact bias from there.
    heights = np.arange(5, 12)
    w = 2.0**-16
    edges = [(np.floor(v / w) * w + v + d * w) / 2 for v, d in ((0.2, 1), (0.33, 0), (0.75, 1))]
    exact, predicted = _exact_and_predicted(
        "pointmass", 100_000, 64, heights, (*edges, 0.5 - w / 2, 0.42)
    )
    assert predicted[0, 0] <= 2.0 * exact[0].max(), (predicted[0], exact[0])


def test_noise_alone_moves_no_height():
    # A probe of pure noise (no data: every count 0 plus its noise) shows no step beyond its
    # noise: the bias stays 0 and the choice is the coarsest candidate (noise grows with h).
    rng = np.random.default_rng(5)
    hist = rng.normal(0.0, 30.0, (2, 64))
    choice = choose_height(hist, 900.0, np.arange(4, 15), np.arange(4, 15) * 1.0, "distdp")
    assert choice.height == 4
    # Nothing read as bias: small, or unreadable (nan: a class total within its noise of 0).
    assert np.all(np.nan_to_num(choice.bias[:2, -1], nan=0.0) < 1e-3)


def test_noise_alone_rarely_moves_the_height():
    # Scores uniform in both classes: no discretisation at any height, so every step a probe
    # shows is noise. Each metric reads one with probability ≤ FALSE_STEP = 5% (Bonferroni over
    # its steps), so the height leaves the coarsest candidate in at most ~10% of probes (two
    # metrics); over 200 probes the binomial spread of that share is 2.1%, and 0.10 + 3 × 0.021
    # bounds it. Steps taken beyond one sd (the rule before) moved it in 78 of 200.
    rng = np.random.default_rng(11)
    heights = np.arange(4, 15)
    moved = 0
    for _ in range(200):
        hist = rng.normal(0.0, 30.0, (2, 64)) + np.array([[300.0], [40.0]])
        moved += choose_height(hist, 900.0, heights, heights * 1.0, "distdp").height != 4
    assert moved / 200 <= 0.10 + 3 * 0.021, moved


def test_a_class_whose_noisy_total_is_zero_reads_as_undefined():
    # Discrete-Laplace probe counts are integers: a rare class's cells can sum to exactly 0.
    # Its AUC is then undefined at every level, not ±inf (whose sign changes between levels
    # and overflowed the steps): its bias is unknown (nan), and the choice leaves it out.
    rng = np.random.default_rng(1)
    hist = rng.integers(-3, 4, (2, 64)).astype(np.float64)
    hist[0] += 20
    hist[1, 0] -= hist[1].sum()
    assert np.isnan(level_values(hist)[0]).all()
    heights = np.arange(3, 12)
    with np.errstate(all="raise"):
        assert np.isnan(discretisation(hist, 4.0, heights)[0]).all()
        choice = choose_height(hist, 4.0, heights, heights * 1.0, "distdp")
    assert choice.height in heights and np.all(np.isfinite(choice.ratio))


def test_probe_claim_states_the_histogram_split_and_parameters():
    for model in ("distdp", "localdp"):
        cfg = resolve_config(model, n=0, epsilon=1.0)
        mech = Mechanism(cfg)
        params = mech.probe_parameters()
        cells = 1 << PROBE_LEVEL[cfg.model]
        assert params["cells_per_class"] == cells
        assert f"over {cells} equal cells" in params["releases"]
        assert "height_choice" in params["chooses"]
        assert mech.released_counts == sum(2 << k for k in cfg.levels) + 2 * cells
        assert f"among {cells}" in mech.guarantee() or f"over {cells} cells" in mech.guarantee()
        if model == "distdp":
            # s·ε on every one of the 2·C counts, Δ = 1 per example: the claim's split.
            assert params["epsilon"] == pytest.approx(cfg.probe_share * 1.0)
            assert params["sensitivity"] == 1
            assert params["composition"].startswith("sequential")
            assert mech.dp_event()["events"][0]["parameter"] == pytest.approx(0.05)
        else:
            assert params["domain"].startswith(f"label × cell: {2 * cells} bits")
            assert params["composition"].startswith("parallel")


# `--height auto:METRIC,…`: the same rule over the metrics asked for alone.

METRIC_SETS = [("auc",), ("ap",), ("pra",), ("auc", "ap"), ("auc", "pra"), ("ap", "pra")]


def test_restricted_rule_takes_the_argmin_of_the_restricted_prediction():
    # Noisy probes of three kinds of data: for every metric set the height is the one whose
    # geometric mean of predicted error ratios over those metrics alone is least (ties to the
    # finer), and the sets do not all agree with the default (the restriction is not a no-op).
    heights = np.arange(4, 15)
    sd = np.sqrt(heights * 1.0) * 12.0
    differs = 0
    for name in ("smooth", "squeezed", "rare"):
        y, s = _family(name, 200_000)
        hist = np.zeros((2, 64))
        np.add.at(hist, (y.astype(int), np.minimum((s * 64).astype(int), 63)), 1)
        noisy = hist + np.random.default_rng(3).normal(0.0, 15.0, hist.shape)
        default = choose_height(noisy, 225.0, heights, sd, "distdp")
        for metrics in METRIC_SETS:
            got = choose_height(noisy, 225.0, heights, sd, "distdp", metrics)
            rows = [HEIGHT_METRICS.index(m) for m in metrics]
            assert got.metrics == metrics
            score = np.log(got.ratio[rows]).mean(axis=0)
            expect = heights[np.flatnonzero(score <= score.min() + 1e-12)[-1]]
            assert got.height == expect, (name, metrics, got.height, expect)
            differs += got.height != default.height
    assert differs >= 3, differs


def test_a_metric_set_the_probe_cannot_read_falls_back_to_all_metrics():
    # A probe whose positives are noise: AUC and AP undefined (nan bias). Choosing for them
    # alone would tie every height (ratio 1) and take the finest, the noisiest; it takes the
    # default's choice instead.
    rng = np.random.default_rng(1)
    hist = rng.integers(-3, 4, (2, 64)).astype(np.float64)
    hist[0] += 20
    hist[1, 0] -= hist[1].sum()
    heights = np.arange(3, 12)
    default = choose_height(hist, 4.0, heights, heights * 1.0, "distdp")
    for metrics in [("auc",), ("ap",), ("auc", "ap")]:
        got = choose_height(hist, 4.0, heights, heights * 1.0, "distdp", metrics)
        assert got.height == default.height < heights[-1]
        assert got.metrics == HEIGHT_METRICS


@pytest.mark.parametrize("model", ["distdp", "localdp"])
def test_auto_auc_is_never_coarser_than_auto_where_the_auc_wants_finer_leaves(model):
    # 20,000 smooth rows: the default trades the AUC for P/R/A (under localdp h = 4 in most
    # probes, where the AUC alone takes 5); choosing for the AUC alone never goes coarser.
    seeds = range(12)
    _, default = _heights("smooth", 20_000, model, seeds)
    _, auc = _heights("smooth", 20_000, model, seeds, height_for=("auc",))
    assert all(a >= d for a, d in zip(auc, default, strict=True)), (auc, default)
    if model == "localdp":
        assert sum(a > d for a, d in zip(auc, default, strict=True)) >= 6, (auc, default)


@pytest.mark.parametrize("model", ["distdp", "localdp"])
def test_auto_precision_takes_the_floor_height_on_smooth_data(model):
    # P/R/A at declared thresholds have no discretisation: their error grows with the height,
    # so the least height auto may pick (AUTO_MIN_HEIGHT, or the thresholds' alignment floor),
    # not the smooth AUC's height from the class totals (distdp 7, localdp 5 here).
    for name in ("precision", "recall", "accuracy", "pra"):
        assert resolve_config(model, n=0, epsilon=1.0, height_for=(name,)).height_for == ("pra",)
    floor = AUTO_MIN_HEIGHT[resolve_config(model, n=0).model]
    old, got = _heights("smooth", 200_000, model, height_for=("precision",))
    assert old > floor and got == [floor] * 3, (old, got)
    cfg = resolve_config(model, n=0, epsilon=1.0, height_for=("precision",))
    y, s = _family("smooth", 200_000)
    hist = np.zeros((2, 1 << PROBE_LEVEL[cfg.model]))
    np.add.at(hist, (y.astype(int), (s * hist.shape[1]).astype(int)), 1)
    aligned = probe.choice_from_histogram(hist, 0.0, cfg, 200_000, floor + 2, 16)
    assert aligned.height == floor + 2


def test_height_for_is_parsed_checked_and_canonical():
    spec = ReleaseSpec.of(height="auto:AUC, recall")
    assert (spec.height, spec.height_for) == ("auto", ("auc", "pra"))
    assert spec.config(n=10_000).height_for == ("auc", "pra")
    # every metric is the default `auto`, bit for bit: nothing restricted, nothing stated
    assert ReleaseSpec.of(height="auto:ap,auc,precision,recall").height_for == ()
    assert ReleaseSpec.of(height="auto:auc") == ReleaseSpec(height_for=("auc",))
    # federated and a fixed rule have no probe to choose with: nothing to state
    assert ReleaseSpec.of(model="federated", height="auto:auc").config(n=100).height_for == ()
    for bad, words in [
        ("auto:", "needs metric names"),
        ("auto:ece", "'ece'"),
        ("auto:auc,,ap", "an empty metric name"),
        ("auto;auc", "must be an integer or 'auto'"),
    ]:
        with pytest.raises(UsageError, match="`height`") as err:
            ReleaseSpec.of(height=bad)
        assert words in str(err.value)
    with pytest.raises(UsageError, match="does not apply to height 5"):
        ReleaseSpec(height=5, height_for=("auc",))
    with pytest.raises(UsageError, match="not both"):
        ReleaseSpec(height="auto:ap", height_for=("auc",))


def test_the_release_states_the_metrics_its_height_was_chosen_for():
    # A public setting, in the claim: `height_for` and the rule's words; the default `auto`
    # documents exactly what it did before (no `height_for`, the same words).
    y, s = _family("smooth", 20_000)
    docs = {}
    for height in ("auto", "auto:ap", "auto:auc"):
        # the even tree: a split's shares follow the metric set too (the AP's leaf bound)
        ev = fedeval.evaluate(y, s, height=height, seed=1, ci_draws=0, level_split="off")
        docs[height] = ev.to_dict()["privacy"]
        assert config_from_dict(config_dict(ev.config)) == ev.config
    assert "height_for" not in docs["auto"]
    assert docs["auto"]["probe"]["chooses"].endswith(
        "of AUC, AP and P/R/A, never below the AUC's height for smooth scores from the "
        "histogram's class totals"
    )
    assert docs["auto:ap"]["height_for"] == ["ap"]
    assert "of AP (the metrics asked for" in docs["auto:ap"]["probe"]["chooses"]
    assert "never below" not in docs["auto:ap"]["probe"]["chooses"]
    assert docs["auto:auc"]["height_for"] == ["auc"]
    # otherwise the same privacy document (both chose h = 5 from the same seeded probe)
    auto, auc = docs["auto"], docs["auto:auc"]
    assert auto["height"] == auc["height"]
    assert auc.pop("height_for") == ["auc"]
    assert auto["probe"].pop("chooses") != auc["probe"].pop("chooses")
    assert auto == auc
    # and a saved release reads back with its metric set (the claim matches its configuration)
    assert mechanism_from_section(docs["auto:ap"]).config.height_for == ("ap",)


@pytest.mark.parametrize(
    ("command", "value"),
    [
        (["evaluate", "s.parquet", "-o", "out.json"], "auto:ece"),
        (["evaluate", "s.parquet", "-o", "out.json"], "auto:"),
        (["curves", "s.parquet", "-o", "out.json"], "auto:auc,,ap"),
        (
            [
                "compare",
                "s.parquet",
                "--baseline-col",
                "score",
                "--candidate-col",
                "new",
                "-o",
                "out.json",
            ],
            "auto:ece",
        ),
        (["plan", "--rows", "1000"], "auto:roc"),
    ],
)
def test_bad_height_metrics_exit_2_naming_the_option(cli, scores, command, value):
    frame = pd.read_parquet(scores)
    frame.assign(new=frame["score"] ** 2).to_parquet(scores)
    result = cli(*command, "--height", value)
    assert result.exit_code == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--height" in lines[0], result.stderr
    assert not Path("out.json").exists()


def test_plan_recommends_the_height_for_the_metrics_asked_for():
    # `fedeval plan --height auto:precision`: the floor height, and the rule says for what.
    default = plan_report(20_000)
    pra = plan_report(20_000, height="auto:precision")
    assert pra.recommended["height"] == AUTO_MIN_HEIGHT[pra.best.config.model]
    assert pra.recommended["height"] < default.recommended["height"]
    assert pra.recommended["height_rule"].endswith("for pra")
    assert default.recommended["height_rule"] == (
        "chosen by a probe of the class totals (two-phase auto)"
    )
