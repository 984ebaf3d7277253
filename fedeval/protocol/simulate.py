"""Run the protocol on data a simulation holds: the fast path or the per-client reference path.

Both return the same `Release` distribution (tests check it); the fast path draws the sum of all
reports directly, the per-client path materialises every client's report, as `encode` will.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Unpack

import numpy as np

from fedeval.core.axis import ScoreAxis
from fedeval.core.config import PrivacyConfig, PrivacyModel, Unit
from fedeval.core.errors import InputError, UsageError
from fedeval.core.hierarchy import cell_index, coarsen
from fedeval.core.params import AUTO_MAX_HEIGHT
from fedeval.core.release import Probe, Release, ScoreHistogram, level_offsets
from fedeval.core.spec import (
    DEFAULT_DRAWS,
    ReleaseKeywords,
    ReleaseSpec,
    SimulationPath,
    check_ci_draws,
    release_spec,
)
from fedeval.estimate.exact import SortedScores
from fedeval.privacy import distdp, localdp, probe
from fedeval.privacy.base import ClientBatch
from fedeval.privacy.decode import decode, noise_draws
from fedeval.privacy.generator import private_generator
from fedeval.privacy.mechanism import Mechanism, mechanism_of
from fedeval.privacy.registry import model_of
from fedeval.tables.scored import ScoredData, cap_examples


def fast_release(data: ScoredData, config: PrivacyConfig, rng: np.random.Generator) -> Release:
    """Draw the aggregate of all clients' reports directly (equal in distribution). A two-phase
    configuration (`config.probed`) draws the probe round first and releases the tree at the
    height it chose (the release's config)."""
    mech = model_of(config.model)
    if not config.probed:
        return mech.draw(data.leaf_counts(config.height), data.n_clients, config, rng)
    floor = data.axis.auto_floor(data.resolution)
    level = probe.probe_level(config.model, data.resolution)
    if config.model is PrivacyModel.DISTDP:
        found = probe.draw_distdp(data.leaf_counts(level), config, rng)
        h = probe.height(found, config, 0, floor, data.resolution)
        config = replace(config, height=h)
        return distdp.draw(data.leaf_counts(h), data.n_clients, config, rng, probe=found)
    # localdp: the probe's reports leave the cells they came from; the rest make the tree.
    fine = min(data.resolution, max(AUTO_MAX_HEIGHT[config.model], floor))
    pad = localdp.empty_reports(data.rows, data.n_clients, config)
    found, rest, rest_pad = probe.draw_localdp(data.leaf_counts(fine), pad, level, config, rng)
    h = probe.height(found, config, data.rows + pad, floor, fine)
    config = replace(config, height=h)
    return localdp.draw(coarsen(rest, h), data.n_clients, config, rng, pad=rest_pad, probe=found)


def _seeded(release: Release, seeded: bool) -> Release:
    return replace(release, seeded=True) if seeded else release


def batch_width(config: PrivacyConfig) -> int:
    """Entries one client's reports hold, for sizing batches of clients: its node vector, or
    under localdp its (at most L) reports' bits at the finest level."""
    return model_of(config.model).batch_width(config)


def client_batches(
    client: np.ndarray, n_clients: int, width: int, max_cells: int = 1 << 22
) -> Iterator[tuple[int, int, np.ndarray]]:
    """Clients c0..c1−1 and the rows of their examples, in batches whose reports (one row of
    `width` entries per client) hold at most `max_cells` entries. The per-client path and
    `encode` walk clients in the same batches, so one seed gives both the same reports."""
    order = np.argsort(client, kind="stable")
    client_sorted = client[order]
    step = max(1, max_cells // width)
    for c0 in range(0, n_clients, step):
        c1 = min(n_clients, c0 + step)
        lo, hi = np.searchsorted(client_sorted, [c0, c1])
        yield c0, c1, order[lo:hi]


@dataclass(frozen=True, eq=False)
class ProbeRound:
    """Round 1 of a two-phase release, as clients play it: the released probe, the configuration
    at the height it chose, and under localdp which report slots it used: `used` per example
    (its one report went to the probe) and `taken` per client (its slots the probe used, real
    or padding), so that round 2 sends every client's other reports only."""

    probe: Probe
    config: PrivacyConfig
    used: np.ndarray | None = None
    taken: np.ndarray | None = None

    def tree_rows(self, sel: np.ndarray) -> np.ndarray:
        """The examples of `sel` that report in the tree (round 2)."""
        return sel if self.used is None else sel[~self.used[sel]]

    def taken_by(self, c0: int, c1: int) -> dict[str, Any]:
        """Keyword arguments that tell clients c0..c1−1's encoder which slots are used."""
        return {} if self.taken is None else {"taken": self.taken[c0:c1]}


def probe_round(
    data: ScoredData, config: PrivacyConfig, rng: np.random.Generator, max_cells: int = 1 << 22
) -> ProbeRound:
    """Round 1 as every client plays it (the per-client path and `encode` share it, so one seed
    gives both the same probe): distdp, each client's class counts plus a Pólya share sized to
    all clients; localdp, each report slot (padding too) is a probe report with probability s,
    drawn in batches of clients, and the OUE bits of its label. The height is chosen from the
    result alone (`fedeval.privacy.probe.height`)."""
    ex = data.examples
    if ex is None:
        raise UsageError("a probe round needs per-example data (keep_examples=True).")
    n = data.n_clients
    floor = data.axis.auto_floor(data.resolution)
    level = probe.probe_level(config.model, data.resolution)
    cells = cell_index(ex.unit_scores, level)
    if config.model is PrivacyModel.DISTDP:
        found = probe.client_sum_distdp(ex.positive, cells, level, n, config, rng)
        h = probe.height(found, config, 0, floor, data.resolution)
        return ProbeRound(found, replace(config, height=h))
    used = np.zeros(len(ex.positive), bool)
    taken = np.zeros(n, np.int64)
    counts = np.zeros(2 << level, np.int64)
    width = (2 << level) * config.examples_per_unit
    for c0, c1, sel in client_batches(ex.client, n, width, max_cells):
        p_cells, labels, client, real = localdp.padded(
            cells[sel], ex.positive[sel], ex.client[sel] - c0, c1 - c0, config
        )
        role = probe.roles(len(labels), config, rng)
        bits = probe.client_bits_localdp(
            labels[role], p_cells[role], level, real[role], config, rng
        )
        counts += bits.sum(axis=0)
        used[sel] = role[real]  # the real examples in their order (the batch is in client order)
        taken[c0:c1] += np.bincount(client[role], minlength=c1 - c0)
    found = Probe(counts, int(taken.sum()))
    total = len(ex.positive) + localdp.empty_reports(len(ex.positive), n, config)
    h = probe.height(found, config, total, floor, data.resolution)
    return ProbeRound(found, replace(config, height=h), used, taken)


FEDERATED_BATCH_WIDTH = 64
"""Entries a federated client's summed report is counted as when batching clients: its one-hot
counts are never made dense, so batches are large (2^16 clients at the default cap)."""


def per_client_release(
    data: ScoredData,
    config: PrivacyConfig,
    rng: np.random.Generator,
    *,
    max_cells: int = 1 << 22,
    progress: Callable[[int, int], None] | None = None,
) -> Release:
    """Materialise every client's report, in batches of clients, and sum them (reference path).

    Clients are taken in batches so that one batch's reports hold at most `max_cells` entries;
    `progress(done, total)` is called after each batch. All clients form one cohort, so each
    distdp share is sized to them all.
    """
    ex = data.examples
    if ex is None:
        raise UsageError("the per-client path needs per-example data (keep_examples=True).")
    mech = model_of(config.model)
    rnd = probe_round(data, config, rng, max_cells) if config.probed else None
    if rnd is not None:
        config = rnd.config
    cells = cell_index(ex.unit_scores, config.height)
    n = data.n_clients
    width = int(level_offsets(config)[-1])
    counts = np.zeros(width, np.int64)
    reporters = np.zeros(len(config.levels), np.int64)
    # A mechanism whose reports are sparse sums a batch's reports without making them dense
    # (`chunk_sum`, drawing from the generator exactly as `client_reports` does); the others
    # materialise the batch's reports and sum them.
    chunk_sum = getattr(mech, "chunk_sum", None)
    width = batch_width(config)
    if not model_of(config.model).TRAITS.adds_noise:
        # Nothing is drawn per client, so batches need not match the encoder's (whose dense
        # reports they bound): a batch's one-hot counts are a bincount of its examples' nodes.
        width = FEDERATED_BATCH_WIDTH
    for c0, c1, sel in client_batches(ex.client, n, width, max_cells):
        kw = {}
        if rnd is not None:
            sel, kw = rnd.tree_rows(sel), rnd.taken_by(c0, c1)
        rows = ClientBatch(cells[sel], ex.positive[sel], ex.client[sel] - c0, c1 - c0, **kw)
        if chunk_sum is not None:
            total, per_level = chunk_sum(rows, config, n, rng)
        else:
            reports, per_level = mech.client_reports(rows, config, n, rng)
            total = reports.sum(axis=0)
        counts += total
        if per_level is not None:
            reporters += per_level if per_level.ndim == 1 else per_level.sum(axis=0)
        if progress is not None:
            progress(c1, n)
    return Release.of_cohort(
        config,
        counts,
        reporters,
        n,
        None if rnd is None else rnd.probe,
        clients_public=mechanism_of(config).clients_public,
    )


def simulate_release(
    data: ScoredData,
    config: PrivacyConfig,
    rng: np.random.Generator,
    path: SimulationPath | str = SimulationPath.FAST,
    progress: Callable[[int, int], None] | None = None,
) -> Release:
    if SimulationPath(path) is SimulationPath.FAST:
        return fast_release(data, config, rng)
    return per_client_release(data, config, rng, progress=progress)


def rng_and_seed(seed: int | np.random.Generator | None) -> tuple[np.random.Generator, int | None]:
    """One generator for the whole run, and the seed to report.

    Without a seed the generator is AES-128-CTR keyed from the OS CSPRNG
    (`fedeval.privacy.generator.private_generator`: a cryptographic generator, at PCG64's
    speed) and nothing is returned to report: a private run publishes no seed. A given seed (or
    Generator) is a reproducible simulation (PCG64); its documents say they are not private
    (`seeded`)."""
    if isinstance(seed, np.random.Generator):
        return seed, None
    if seed is None:
        return private_generator(), None
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise UsageError(f"`seed` must be a non-negative integer. Found {seed!r}.")
    return np.random.default_rng(int(seed)), int(seed)


def is_seeded(seed: int | np.random.Generator | None) -> bool:
    """Whether a run's noise is reproducible from what its caller gave (not private)."""
    return seed is not None


@dataclass(frozen=True, eq=False)
class Simulated:
    """One private release, decoded, with what estimators need: simulated from a scored table,
    or loaded from a saved aggregate (then `truth` is None and no exact values exist).

    `truth` holds each class's sorted raw scores: the exact values a simulation reports.
    `rows` and `clients` are exact where known (a simulation's input; a release that may publish
    them), else None: use `examples_estimate`, computed from the noisy counts.
    """

    config: PrivacyConfig
    mechanism: Mechanism
    release: Release = field(repr=False)
    histogram: ScoreHistogram = field(repr=False)
    axis: ScoreAxis = field(default_factory=ScoreAxis.linear)
    rows: int | None = 0
    clients: int | None = 0
    truth: SortedScores | None = field(default=None, repr=False)
    seed: int | None = None
    path: SimulationPath | None = None
    ci_rng: np.random.Generator | None = field(default=None, repr=False)
    ci_draws: int = DEFAULT_DRAWS
    dropped: int = 0  # examples a per-client cap left out of the release
    grouped: bool = False  # the input named clients (a client column): public, no count

    @cached_property
    def noise_draws(self) -> np.ndarray | None:
        """Fresh noise on the release as it reaches the leaves, (draws, 2, L), drawn once per
        run and shared by every interval; None without noise or with ci_draws = 0.

        Memory is bounded whatever the height: at most `MAX_DRAW_VALUES` values are kept (so
        `ci_draws` draws up to h = 17, 32 at h = 20), made `DRAW_CHUNK_VALUES` at a time."""
        if self.ci_draws <= 0:
            return None
        assert self.ci_rng is not None  # simulate and from_release always give one
        size = self.histogram.leaves.size
        n = max(2, min(self.ci_draws, MAX_DRAW_VALUES // size))
        step = max(1, DRAW_CHUNK_VALUES // size)
        if step >= n:
            return noise_draws(self.histogram, n, self.ci_rng)
        out = np.empty((n, *self.histogram.leaves.shape))
        for start in range(0, n, step):
            part = noise_draws(self.histogram, min(step, n - start), self.ci_rng)
            if part is None:
                return None
            out[start : start + len(part)] = part
        return out

    @property
    def examples_estimate(self) -> float:
        """Examples in the release as the noisy counts estimate them (post-processing)."""
        return self.histogram.positives + self.histogram.negatives

    @property
    def size_for_tuning(self) -> float:
        """n for parameter formulas (buckets, quantiles): exact where the mechanism may publish
        it, else the release's own estimate, so that what is tuned from it stays
        post-processing of the release."""
        if self.rows is not None and self.mechanism.examples_public:
            return float(self.rows)
        return max(self.examples_estimate, 1.0)

    @property
    def delta(self) -> float | None:
        return 0.0 if model_of(self.config.model).TRAITS.adds_noise else None

    @property
    def simulation(self) -> bool:
        return self.path is not None

    @property
    def score_range(self) -> tuple[float, float]:
        return self.axis.score_range

    def to_unit(self, x: np.ndarray | float) -> np.ndarray:
        """Map scores (or thresholds) from the score range onto [0, 1]."""
        return self.axis.to_unit(x)

    def from_unit(self, u: np.ndarray | float) -> np.ndarray | float:
        """Map unit positions (cell edges, midpoints) back to scores."""
        return self.axis.from_unit(u)

    @classmethod
    def from_release(
        cls,
        release: Release,
        score_range: tuple[float, float] | ScoreAxis,
        *,
        seed: int | np.random.Generator | None = None,
        ci_draws: int = DEFAULT_DRAWS,
    ) -> Simulated:
        """A saved or deployed release: decoded, no raw data, no exact values."""
        check_ci_draws(ci_draws)
        rng, seed_used = rng_and_seed(seed)
        hist = decode(release)
        # A class total estimated at ≤ 0 is answered as the one-shot answers it: each metric that
        # divides by it is undetermined (0.5 over [0, 1], with the reason), not an error.
        mechanism = mechanism_of(release.config, seeded=release.seeded, probe=release.probe)
        return cls(
            release.config,
            mechanism,
            release,
            hist,
            score_range
            if isinstance(score_range, ScoreAxis)
            else ScoreAxis.linear(*map(float, score_range)),
            release.examples,
            release.n_clients,
            None,
            seed_used,
            None,
            rng,
            ci_draws,
        )


MAX_DRAW_VALUES = 1 << 26
"""Noise-draw values a run keeps (512 MB): 200 draws of both classes' leaves up to h = 17."""
DRAW_CHUNK_VALUES = 1 << 23
"""Noise-draw values made at once (the consistency step's temporaries scale with it)."""


def check_both_classes(data: ScoredData, model: PrivacyModel | str, where: str = "") -> None:
    """Refuse a table with one class where the run's values are exact (exact values, or the
    exact sums of federated), naming it with `where` ("'f.csv', column 'label': ").

    A private run decides from its noisy release, as `--from` does: refusing there would tell a
    data set without positives from its neighbour with one (ε = ∞ for the exit code). Exact
    values, or exact sums, say as much anyway."""
    private = model_of(model).TRAITS.adds_noise and data.sorted_scores is None
    if (data.positives == 0 or data.negatives == 0) and not private:
        missing = "positive" if data.positives == 0 else "negative"
        raise InputError(
            f"{where}the labels hold no {missing} example: AUC, precision and recall are undefined."
        )


def simulate(
    data: ScoredData,
    *,
    spec: ReleaseSpec | None = None,
    progress: Callable[[int, int], None] | None = None,
    **keywords: Unpack[ReleaseKeywords],
) -> Simulated:
    """Resolve the configuration, run the protocol once and decode the release.

    The release is `spec` (`fedeval.core.spec.ReleaseSpec`), or the one its keywords make
    (`model`, `epsilon`, `height`, `shape`, `unit`, `max_examples`, `relation`, `seed`,
    `ci_draws`, `path`; distdp by default, as every entry point). `ci_draws` fresh noise draws
    (from a child of the run's generator) make the 95% intervals. Under unit client each
    client's examples are first capped at `max_examples` (chosen at random, from a child
    generator).
    """
    spec = release_spec(spec, keywords)
    config = spec.config(n=data.rows, min_height=data.axis.auto_floor(data.resolution))
    check_both_classes(data, config.model)
    path = spec.path
    rng, seed_used = rng_and_seed(spec.seed)
    ci_rng, cap_rng = rng.spawn(2)
    if config.unit is Unit.CLIENT:
        assert config.max_examples is not None  # resolve_config requires it under unit client
        data = cap_examples(data, config.max_examples, cap_rng)
    release = _seeded(simulate_release(data, config, rng, path, progress), seed_used is not None)
    config = release.config  # a two-phase `auto`: the height its probe chose
    mechanism = mechanism_of(config, seeded=release.seeded, probe=release.probe)
    return Simulated(
        config,
        mechanism,
        release,
        decode(release),
        data.axis,
        data.rows,
        data.n_clients,
        data.sorted_scores,
        seed_used,
        path,
        ci_rng,
        spec.ci_draws,
        data.dropped,
        data.grouped,
    )
