"""Parameters chosen for the user: release shape and height for a model, n and ε.

The error of a threshold metric from leaves of width w = 2^-h has two parts: privacy noise on
the leaves a prefix sums, and the discretisation inside the leaf that holds the threshold (≈ κ/L²
of a class for smooth scores, since the leaf is taken as uniform). Balancing them gives
L ∝ (εn)^{2/5} for distdp and L ∝ (n/σ²)^{1/5} for OUE (σ² its per-report variance factor).

Shape: measured on the sample data and its 500k version (40 noise draws per setting), the
hierarchy with least-variance consistency matches or beats the flat release for both DP models
at their best heights, and degrades far more gently when h is off the optimum, so `auto` picks
it; the formulas above land on the measured optimum (h ≈ 8 for distdp ε = 1, 5–6 for OUE ε = 5).
Federated releases are exact, where both shapes give the same leaves; flat is the smaller one.
`benchmarks/accuracy.py` prints the comparison.

Per estimator (`benchmarks/height.py`, 1M rows, median |error| over noise draws). Declared
thresholds are cell edges (`fedeval.core.axis`), so P/R/A there have no discretisation term and
prefer
the coarsest tree that keeps them on edges (`min_height`); what the height still trades is the
AUC's and the curves' within-leaf error against noise. The one-phase rule from n (`auto_height`,
`auto` before the probe; now federated's), for the AUC over 200 draws (the AUC alone;
height.py's 40 draws rank heights only to about ±15%):

    data, model          auto h  error    best fixed h  error    auto/best
    smooth, distdp ε=1   9       1.18e-5  8             9.45e-6  1.25
    1.5% pos, distdp     9       2.31e-4  6             1.63e-4  1.42
    smooth, localdp ε=5  6       5.51e-4  6             5.51e-4  1.00
    1.5% pos, localdp    6       8.46e-3  3             5.34e-3  1.58

The AUC's noise term grows with 1/m² (m: the minority class count), so its optimum moves down
with m; m is private before the release, so no rule on n alone serves both families.

Reading the AUC from a coarser level ℓ of the released tree (post-processing) does not help:
the AUC's noise is set by the release height, not the read level. Decomposed (1.5% positives,
distdp, 200 draws): released at h = 9, the noise sd is 2.8e-4 to 3.2e-4 at every read level
ℓ = 2 … 9, against 2.1e-4 for a tree released at h = 6 (ε/h per level: sd ∝ h); only the bias
falls with ℓ (2.1e-4 at ℓ = 5, 6.0e-5 at 6, 1.8e-5 at 7). The best single read level of an h = 9
tree is 1.26× the h = 6 release's error (200 draws). A rule choosing ℓ per release by predicted
MSE (variance from noise draws, bias² from level differences less their variance) picked ℓ = 7
in 33 of 40 releases: 2.70e-4 against 2.98e-4 at the leaves, still 1.5× the h = 6 release;
Lepski's rule over the levels gave 2.9e-4 → 2.2e-4 (distdp) but 7.4e-3 → 8.4e-3 (localdp).

What `auto` is under DP is a two-phase release (`fedeval.privacy.probe`,
`fedeval.privacy.mechanism`): PROBE_SHARE = 5% of ε (distdp; under localdp 5% of the report
slots, each unit still reporting once at the same ε) buys a noisy per-class histogram of a few
cells, and `fedeval.core.height_choice` predicts each metric's noise and discretisation error
at every candidate height from it. (Class totals alone, as below, cannot tell a rare class
concentrated in the top cells or scores squeezed into a narrow range from smooth scores over
[0, 1]; on such data they chose trees 2–6 levels too coarse.) The class-total rule it replaced,
`probe_height`, balances the AUC's noise against a bias falling as 4^-h:
2^h = 0.45·√(ε·m) (distdp, ε the tree's per example) or (m²/(n·σ²))^(1/4) (OUE), clamped to
[max(AUTO_MIN_HEIGHT, the thresholds' alignment floor), AUTO_MAX_HEIGHT]. The height is then
post-processing of the released totals: no exact count of the data reaches any document (the
one-phase rule chose h from the exact n, which a rounding boundary made differ between
neighbours). Fixed heights and federated (exact totals: `auto_height`) are one-phase.

The other metrics: declared thresholds are cell edges from the alignment floor up, so P/R/A
need no finer tree than the floor, which the rule never goes below; AP prefers a finer tree
than the AUC. The issue's AP targets (1.5% positives: ≤ 2e-2 distdp, ≤ 5e-2 localdp) are
checked at the AUC's height (`benchmarks/height.py`, 1M rows, 40 draws, median |error|):

    data, model         h  ROC AUC                  AP                       worst P/R/A
                           error   h* error*  r     error   h* error*  r     error   h* error*  r
    smooth distdp ε=1   8  8.62e-6  8 1.17e-5 0.74  6.15e-5 10 4.61e-5 1.33  1.26e-4  8 9.90e-5 1.27
    smooth localdp ε=5  6  4.08e-4  9 4.37e-4 0.94  1.07e-3  6 9.25e-4 1.16  4.09e-3  4 4.68e-3 0.87
    rare distdp ε=1     6  1.60e-4  6 1.79e-4 0.89  1.03e-3  8 5.70e-4 1.81  2.07e-3  6 1.07e-3 1.94
    rare localdp ε=5    4  5.87e-3  4 4.38e-3 1.34  1.84e-2  4 1.58e-2 1.17  5.11e-2  4 4.67e-2 1.10

    (h: the height `auto` chose, the same for every metric; per metric the median |error| there,
    the best fixed height h*, its error, and r = error / error*.)

(The localdp rows are with levels 2..h, `LEVEL_1_FROM_EPSILON`.) The AUC is within 1.2× of
the best fixed height but for rare localdp at 40 draws, where it is not resolved: over 400
draws (seeds 1000…1399, median |AUC error|) auto (h = 4) 6.19e-3, h = 3 6.02e-3, h = 4 5.99e-3,
h = 5 7.08e-3: auto/best 1.03 (200 draws: 1.06). With levels 1..h it was 1.13 (400 draws; 1.24
at 200): h = 4 6.65e-3, h = 3 5.66e-3. A median of 400 |errors| has a relative sd near 5%, and
the exact noise sd gives h = 4 over h = 3 as 1.15 with levels 1..h and 1.19 with 2..h, so the
move is mostly draw noise: the ratio sits near 1.1, under the target at 400 draws either way.
The rule's h = 3 is below the default thresholds' alignment floor (4); at h = 3 AP is 1.6× and
the worst P/R/A 2.8× what they are at 4, so the floor stays. AP meets the issue's targets
(1.0e-3 ≤ 2e-2, 1.8e-2 ≤ 5e-2). The worst-P/R/A ratios at the same h (1.94, 1.27) are the noise
of a maximum over thresholds of 40 draws (rare distdp, 12 draws: auto 1.8e-3, a given h = 6
2.2e-3), not a cost of the probe, which takes 5% of ε (noise sd ×1/0.95) or of the reports (sd
×√(1/0.95)). Under localdp 40-draw medians move by up to 1.6× between runs that differ only in
which reports the probe takes (smooth, h = 6 in each: AUC 3.7e-4, 6.1e-4, 5.4e-4 at s = 0.02,
0.05, 0.1), so ratios near the target are not resolved there at 40 draws.
"""

from __future__ import annotations

import math
from typing import Literal

from fedeval.core.config import (
    PrivacyConfig,
    PrivacyModel,
    Relation,
    Shape,
    Unit,
    check_choices,
    check_height,
    check_height_for,
)
from fedeval.core.errors import UsageError

FEDERATED_HEIGHT = 16
"""Federated error is about 2^-h and the release costs O(2^h): 65,536 leaves is cheap."""

AUTO_MAX_HEIGHT = {
    PrivacyModel.FEDERATED: FEDERATED_HEIGHT,
    PrivacyModel.DISTDP: 14,
    PrivacyModel.LOCALDP: 10,
}
"""The largest height `auto` picks for each model."""


def oue_sigma2(epsilon: float) -> float:
    """Per-report variance factor of OUE: 4e^ε / (e^ε − 1)² (Wang et al. 2017)."""
    return 4 * math.exp(epsilon) / math.expm1(epsilon) ** 2


AUTO_MIN_HEIGHT = {PrivacyModel.DISTDP: 4, PrivacyModel.LOCALDP: 2}
"""The smallest height `auto` picks for each DP model (before the thresholds' alignment floor)."""

PROBE_SHARE = 0.05
"""s of a two-phase `auto`: the probe's share of ε (distdp) or of the reports (localdp). The
height needs m only to within a factor ~1.4 (h moves by ½·log2 of m's error, ¼ under OUE), and
the tree pays 1/(1 − s) in noise sd (distdp) or √(1/(1 − s)) (localdp). Measured with
`benchmarks/height.py`'s data (1M rows, 40 draws, median |error| of AUC, AP, worst P/R/A):
distdp, s = 0.02 and 0.05 choose the same heights with errors equal within noise, 0.1 costs
5–8% and 0.2 25–35%; localdp, 0.02–0.1 choose the same heights (errors within the draws' noise).
0.05 rather than 0.02 for small populations, where the probe's relative error on m grows: at
20k rows with 1.5% positives (m = 300), computed from the OUE variance, the localdp probe's sd
on m is 50% at 0.05 against 80% at 0.02 (distdp ε = 1: 9% against 24%)."""

AUC_SCALE = {PrivacyModel.DISTDP: 0.45, PrivacyModel.LOCALDP: 1.0}
"""c in 2^h = c·(ε·m)^(1/2) (distdp) or c·(m²/(n·σ²))^(1/4) (OUE), fitted on the two data
families of `benchmarks/height.py` (smooth; 1.5% positives) at 1M rows."""


def probe_height(
    model: PrivacyModel | str,
    *,
    negatives: float,
    positives: float,
    epsilon: float,
    reports: float = 0.0,
    min_height: int = 0,
) -> int:
    """The AUC's height from (noisy) class totals: noise sd ≈ h/(ε·m) under distdp or
    √(h·n)·σ/m under OUE for the minority count m, against a bias falling as 4^-h, balanced at
    2^h = c·√(ε·m) or c·(m²/(n·σ²))^(1/4). `epsilon` is the tree's ε per example (distdp) or
    one report's ε (localdp), `reports` the number of reports n (localdp). Clamped to
    [max(AUTO_MIN_HEIGHT, min_height), AUTO_MAX_HEIGHT]: the thresholds' alignment floor wins."""
    model = PrivacyModel(model)
    m = max(min(float(positives), float(negatives)), 1.0)
    if model is PrivacyModel.DISTDP:
        leaves = AUC_SCALE[model] * math.sqrt(epsilon * m)
    elif model is PrivacyModel.LOCALDP:
        leaves = AUC_SCALE[model] * (m * m / (max(reports, 1.0) * oue_sigma2(epsilon))) ** 0.25
    else:
        return max(FEDERATED_HEIGHT, min_height)
    h = round(math.log2(max(leaves, 1.0)))
    return int(max(min(max(h, AUTO_MIN_HEIGHT[model]), AUTO_MAX_HEIGHT[model]), min_height))


def probe_epsilon_per_example(config: PrivacyConfig) -> float:
    """The ε `probe_height` balances with: the tree's ε per example under distdp ((1 − s)·ε/L,
    halved under replace, where Δ doubles), or one OUE report's ε under localdp."""
    eps = config.epsilon
    if eps is None:
        raise ValueError("a probe needs ε")
    if config.model is PrivacyModel.LOCALDP:
        return eps / config.examples_per_unit
    doubled = 2 if config.relation is Relation.REPLACE else 1
    return eps * (1.0 - config.probe_share) / (config.examples_per_unit * doubled)


def auto_height(model: PrivacyModel, n: int, epsilon: float | None) -> int:
    """The leaf height that balances noise against discretisation (module docstring)."""
    if model is PrivacyModel.FEDERATED or epsilon is None:
        return FEDERATED_HEIGHT
    n = max(n, 2)
    if model is PrivacyModel.DISTDP:
        leaves = 2.0 * (epsilon * n / 2) ** 0.4
        return int(min(max(round(math.log2(leaves)), 4), AUTO_MAX_HEIGHT[model]))
    leaves = 2.0 * (n / oue_sigma2(epsilon)) ** 0.2
    return int(min(max(round(math.log2(leaves)), 2), AUTO_MAX_HEIGHT[model]))


def data_resolution(model: PrivacyModel | str, height: int | str) -> int:
    """The leaf height to reduce data to while reading: the height asked for, or the largest one
    `auto` may pick. Small resolutions keep the streaming counts in cache."""
    # Refused here, before a file is read, with the message resolve_config would give.
    h, _ = parse_height(height)
    if h == "auto":
        try:
            return AUTO_MAX_HEIGHT[PrivacyModel(model)]
        except ValueError:
            return FEDERATED_HEIGHT  # resolve_config reports the unknown model
    return h


def parse_height(height: object) -> tuple[int | Literal["auto"], tuple[str, ...]]:
    """('auto', ()), ('auto', metrics) of 'auto:METRIC[,METRIC…]', or (h, ()) with h an int
    in 1..MAX_HEIGHT (a string of digits too, as the CLI gives it)."""
    if height == "auto":
        return "auto", ()
    if isinstance(height, str):
        head, colon, names = height.partition(":")
        if head.strip().lower() == "auto" and colon:
            metrics = tuple(n for n in names.split(","))
            if not names.strip():
                raise UsageError(
                    f"`height` auto: needs metric names, e.g. auto:auc or auto:auc,ap. Found "
                    f"{height!r}."
                )
            return "auto", check_height_for(metrics)
        try:
            height = int(height)
        except ValueError:
            raise UsageError(f"`height` must be an integer or 'auto'. Found {height!r}.") from None
    return check_height(height), ()


def resolve_config(
    model: PrivacyModel | str,
    *,
    n: int,
    epsilon: float | None = None,
    height: int | str = "auto",
    shape: Shape | str = "auto",
    unit: Unit | str = Unit.EXAMPLE,
    max_examples: int | None = None,
    relation: str | None = None,
    min_height: int = 0,
    probe: bool = True,
    height_for: tuple[str, ...] = (),
    level_split: str = "off",
) -> PrivacyConfig:
    """A complete `PrivacyConfig` from user choices, filling 'auto' and the papers' default ε.

    Under unit client the auto height sees the budget one example gets, ε/L; `relation` is the
    neighbouring relation (None: the model's default, `fedeval.core.config.DEFAULT_RELATION`).
    `min_height` is the least height 'auto' may pick: the alignment height of declared
    thresholds (`fedeval.core.axis`), which a coarser tree would cut through.

    'auto' under distdp or localdp is two-phase (`probe_share` = PROBE_SHARE): the height is
    chosen later, from the probe's noisy class totals (`fedeval.privacy.probe`); `probe=False`
    keeps the one-phase rule from n (`auto_height`), for a caller with no probe round.
    `height_for` (`--height auto:METRIC,…`) names the metrics the probe chooses the height for;
    it applies to a two-phase release only (a fixed rule or height has no choice to make).
    `level_split` (off, auto or F:S) splits a distdp tree's ε over its levels
    (`level_split_of`)."""
    # checked before ε enters the height formula
    model, epsilon, unit, relation = check_choices(model, epsilon, unit, max_examples, relation)
    probe_share = 0.0
    if height == "auto" and model is not PrivacyModel.FEDERATED and probe:
        # Two-phase: the probe chooses the height (`probe_height`); until it has run, the
        # height is the least `auto` may pick, and a release cannot be made without the probe.
        probe_share = PROBE_SHARE
        height = max(AUTO_MIN_HEIGHT[model], min_height)
    elif height == "auto":
        # The budget one example gets: ε/L; under distdp halved by replace (Δ doubles).
        doubled = model is PrivacyModel.DISTDP and relation is Relation.REPLACE
        factor = (max_examples or 1) * (2 if doubled else 1)
        per_example = None if epsilon is None else epsilon / factor
        height = max(auto_height(model, n, per_example), min_height)
    else:
        try:
            height = int(height)
        except (TypeError, ValueError) as e:
            raise UsageError(f"`height` must be an integer or 'auto'. Found {height!r}.") from e
    # One report's ε under localdp: ε, or ε/L under unit client (each client sends L reports).
    report_epsilon = epsilon
    if unit is Unit.CLIENT and epsilon is not None:
        report_epsilon = epsilon / (max_examples or 1)
    if shape == "auto":
        shape = Shape.FLAT if model is PrivacyModel.FEDERATED else Shape.HIERARCHY
    try:
        shape = Shape(shape)
    except ValueError as e:
        raise UsageError(f"unknown shape {shape!r}; choose hierarchy, flat or auto.") from e
    split = level_split_of(level_split, model, min_height, height_for)
    return PrivacyConfig(
        model=model,
        height=height,
        shape=shape,
        epsilon=epsilon,
        unit=unit,
        max_examples=max_examples,
        relation=relation,
        probe_share=probe_share,
        first_level=first_level(model, shape, report_epsilon),
        height_for=height_for if probe_share else (),
        split_level=split[0],
        split_share=split[1],
        split_leaf_bound=split[2],
    )


SPLIT_SHARE = 0.8
"""s of `--level-split auto`: the share of the tree's ε spread over the levels up to f, the
thresholds' alignment level. A count of [t, 1] at a declared threshold t (a level-f edge) is
read from at most one node per level ≤ f, each at s·ε/f instead of a height-f tree's ε/f, so
its noise sd is at most 1/s = 1.25× that tree's at any height (the finer levels' measurements,
combined by least squares, only lower it): the issue's 1.25× bound itself, not a fit to data.
Against a fixed height, which runs no probe, the tree's own ε is (1 − PROBE_SHARE) of it, so the
bound there is 1/(0.95·s) ≈ 1.32× (s ≈ 0.842 would give 1.25×, at 1.78× the smooth AP's
interval width: measured, not taken)."""


AP_LEAF_BOUND = 1.25
"""c of `--level-split auto` where the AP is reported: the finest levels keep enough of the
tree's ε that a leaf's noise sd grows by at most about c over the even tree's at the same
height (`PrivacyConfig.split_share_here`): the issue's 1.25× for the AP, which reads the
leaves, as SPLIT_SHARE is for P/R/A."""


def check_level_split(value: object) -> str:
    """`level_split`: 'off', 'auto' or 'F:S' (F ≥ 1 an integer level, 0 < S < 1 the share of
    the tree's ε for the levels ≤ F), normalised; anything else refused."""
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text in ("off", "auto"):
        return text
    head, colon, tail = (text or "").partition(":")
    try:
        f, share = int(head), float(tail)
    except ValueError:
        f, share = 0, 0.0
    if not colon or f < 1 or not 0.0 < share < 1.0:
        raise UsageError(
            "`level_split` must be off, auto or F:S (F ≥ 1 the coarsest levels' last, S in "
            f"(0, 1) their share of the tree's ε), e.g. 4:0.8. Found {value!r}."
        )
    return f"{f}:{share:g}"


def level_split_of(
    setting: str, model: PrivacyModel, min_height: int, height_for: tuple[str, ...] = ()
) -> tuple[int, float, float]:
    """(split_level f, split_share s, split_leaf_bound c) of a checked `level_split` setting:
    (0, 0.0, 0.0) for off; auto: f = `min_height`, the thresholds' alignment level (public:
    the declared thresholds fix it before any data are read), s = SPLIT_SHARE, and where the
    AP is reported (`height_for` () or naming ap) c = AP_LEAF_BOUND, under distdp only (the
    even tree elsewhere, and where no threshold sets a level); F:S as given, distdp only."""
    setting = check_level_split(setting)
    if setting == "off" or (
        setting == "auto" and (model is not PrivacyModel.DISTDP or min_height < 1)
    ):
        return 0, 0.0, 0.0
    if setting == "auto":
        ap = not height_for or "ap" in height_for
        return min_height, SPLIT_SHARE, AP_LEAF_BOUND if ap else 0.0
    if model is not PrivacyModel.DISTDP:
        raise UsageError(
            f"`level_split` {setting} splits a distdp tree's ε over its levels; the model is "
            f"{model.value} (drop it or choose distdp)."
        )
    f, share = setting.split(":")
    return int(f), float(share), 0.0


LEVEL_1_FROM_EPSILON = 5.0
"""From this ε per report up, a localdp hierarchy releases levels 2..h, not 1..h.

A decoded OUE count's variance is a floor n·q(1 − q) the same for every cell plus a term
c·(p(1 − p) − q(1 − q)) growing with the cell's count c (both over the level's share π·(p − q)²).
Level 1's cells are the largest (about n/4 each), so once the count term dominates the floor
(3:1 at ε = 4, 9:1 at ε = 5, 25:1 at ε = 6) a level-1 cell measured directly is barely better
than the sum of its two level-2 cells, and its 1/h of the reports do more on the finer levels.
Computed exactly (the library's least-squares consistency on each level's OUE and sampling
variance, the levels' negatively correlated sampling included; benchmarks/hard.py's data at its
auto heights), levels 2..h against 1..h at ε = 5: the variance of a count ≥ t, averaged over
the leaf edges t, 0.90–1.00× (4: 0.99–1.04×); over the top eighth of [0, 1] 0.77–0.83×; the
AUC's sd 0.95–1.00× (4: 0.95–1.04×). The cost: a count ≥ ½ (level 1's own edge) 1.08–1.38×
the variance. benchmarks/allocation.py --levels prints these. Measured, hard.py (localdp
ε = 5, 1000 releases, median |error|): worst P/R/A lower in all four families (smooth precision
3.27e-3 → 2.95e-3, now under the issue's 3e-3; 1.5% positives 3.74e-2 → 3.33e-2), AUC lower in
three (unequal clients' 8.7e-4 → 9.5e-4), AP lower in two and within 3% in two, coverage within
93–97% (point masses' precision 0.953 → 0.940; the noise draws match fresh releases' spread,
1500 of them: 1.00–1.03×). height.py (1.5% positives, 1M): AUC auto/best 1.13 → 1.03 over 400
draws, mostly draw noise (see the module docstring). Data-independent (ε and h are public):
each report still goes to one released level drawn before any data is read, so it stays ε-LDP
and the claim is unchanged."""


def first_level(model: PrivacyModel, shape: Shape, report_epsilon: float | None = None) -> int:
    """The coarsest level a release starts at: 2 for a localdp hierarchy whose reports get at
    least `LEVEL_1_FROM_EPSILON` each, else 1 (`PrivacyConfig` caps it at the height)."""
    if (
        model is PrivacyModel.LOCALDP
        and shape is Shape.HIERARCHY
        and report_epsilon is not None
        and report_epsilon >= LEVEL_1_FROM_EPSILON
    ):
        return 2
    return 1


def auto_quantiles(model: PrivacyModel | str, n: int, epsilon: float | None) -> int:
    """Q for the ROC and PR curves: the area error falls roughly as 1/Q until privacy noise
    takes over. `benchmarks/curves.py` shows the plateau near Q ≈ √(εn)/2 under distdp (from
    Q ≈ 64 at εn = 2·10⁴, Q ≈ 128 at 5·10⁴); for OUE εn is replaced by n/σ²_OUE. Between 16
    and 256 (beyond it the noiseless gain is below 1e-4)."""
    model = PrivacyModel(model)
    if model is PrivacyModel.FEDERATED or epsilon is None:
        return 256
    strength = epsilon * n if model is PrivacyModel.DISTDP else n / oue_sigma2(epsilon)
    q = 2 ** round(math.log2(max(math.sqrt(strength) / 2, 1.0)))
    return int(min(max(q, 16), 256))
