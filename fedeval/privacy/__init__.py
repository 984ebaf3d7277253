"""Privacy models: one module each (`federated`, `distdp`, `localdp`), the same protocol
(`fedeval.privacy.base.ReleaseModel`), listed by `fedeval.privacy.registry`.

Each model's module carries its claim's numbers and words and the pipeline's four steps:

- ``draw(leaf_counts, n_clients, config, rng)``: the fast path, the aggregate of one cohort of
  all clients drawn directly with the distribution of the sum of their reports;
- ``client_reports(rows, config, cohort_size, rng)``: the
  per-client reference path, every client's report materialised (the deployed encoder);
- ``decode(release)``: unbiased per-level estimates and their per-count noise variance;
- ``measurement_noise(hist, n_draws, rng)``: fresh noise as the release got it (intervals).

What each release claims (relation, unit, sensitivity, noise, guarantee, DP event) is stated by
`fedeval.privacy.mechanism.Mechanism`, which asks the model's module for its parts: the single
source every document and the ledger read. The multiclass calibration's Gaussian mechanism is
`fedeval.privacy.gaussian`; DP events are `fedeval.privacy.events`, composed by the one
accountant `fedeval.privacy.accounting`.
"""

from __future__ import annotations
