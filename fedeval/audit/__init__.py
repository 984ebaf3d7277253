"""Empirical privacy audit: try to break each mechanism's claim as an adversary would.

Three checks (method: shared AUDIT.md), each run on neighbouring datasets D and D′ under the
mechanism's own relation and unit, through the code a deployment runs (the per-client encoder,
the pairwise masks, the server's unmasking, the release document):

1. **Deterministic leaks** (`deterministic_leaks`): every document a party receives is flattened
   into path → value; a path equal across repeated runs on D, equal across runs on D′, and
   different between them is a deterministic function of the data that separates neighbours:
   ε = ∞ whatever the noise.
2. **ε lower bound** (`epsilon_lower_bound`): for pure ε-DP, P[M(D) ∈ S] ≤ e^ε P[M(D′) ∈ S] for
   every event S. With T trials per side, one-sided Clopper–Pearson bounds give
   ε_lb = ln(p_lo(D) / p_hi(D′)); the events are thresholds τ of the likelihood-ratio statistic
   (distdp: Λ(x) = Σ_i |x_i − c′_i| − |x_i − c_i|; OUE: the report bits that differ), scanned
   with a Bonferroni correction. The audit fails if ε_lb exceeds the claim.
3. **Per-cohort noise** (`variance_interval`): each cohort's unmasked sum minus its exact sum,
   over many runs, must show the mechanism's stated variance (χ² interval), so no secure sum the
   server unmasks on its own carries less noise than the claim needs.

The tests in ``tests/audit`` run these on every model × relation × unit and on deliberately
broken mechanisms (the checks must fail there); ``benchmarks/audit.py`` prints the table.

Modules: `statistics` (bounds and intervals), `fields` (documents as fields, leaks between
runs), `scenarios` (neighbouring datasets, statistics per mechanism, the audits themselves),
`heights` (the two-phase height choice over many probes at once), `level_weights` (the tree's
part of a distdp likelihood ratio when its ε is split over the levels).
"""

from __future__ import annotations

from fedeval.audit.fields import (
    all_keys,
    deterministic_leaks,
    directory_fields,
    flatten,
    parquet_fields,
    parquet_layout_fields,
    png_fields,
    svg_fields,
    text_fields,
    without_clock,
)
from fedeval.audit.scenarios import (
    BOUNDARY_PER_CLIENT,
    PROBE_RESOLUTION,
    PROBE_WEIGHTS,
    Scenario,
    all_scenarios,
    audit_epsilon,
    cohort_noise,
    distdp_release_counts,
    distdp_two_phase_statistic,
    exact_counts,
    honest_noise,
    localdp_statistic,
    localdp_two_phase_statistic,
    two_phase_scenarios,
)
from fedeval.audit.statistics import (
    EpsilonBound,
    clopper_pearson,
    correlation_bound,
    epsilon_lower_bound,
    laplace_statistic,
    variance_interval,
)

__all__ = [
    "BOUNDARY_PER_CLIENT",
    "PROBE_RESOLUTION",
    "PROBE_WEIGHTS",
    "EpsilonBound",
    "Scenario",
    "all_keys",
    "all_scenarios",
    "audit_epsilon",
    "clopper_pearson",
    "cohort_noise",
    "correlation_bound",
    "deterministic_leaks",
    "directory_fields",
    "distdp_release_counts",
    "distdp_two_phase_statistic",
    "epsilon_lower_bound",
    "exact_counts",
    "flatten",
    "honest_noise",
    "laplace_statistic",
    "localdp_statistic",
    "localdp_two_phase_statistic",
    "parquet_fields",
    "parquet_layout_fields",
    "png_fields",
    "svg_fields",
    "text_fields",
    "two_phase_scenarios",
    "variance_interval",
    "without_clock",
]
