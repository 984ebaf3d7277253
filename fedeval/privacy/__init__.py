"""Privacy models: one module each, with the same four functions, and the shared claim.

- ``draw(leaf_counts, n_clients, config, rng)``: the fast path, the aggregate of one cohort of
  all clients drawn directly with the distribution of the sum of their reports;
- ``client_reports(cells, labels, client, n_clients, config, cohort_size, rng)``: the
  per-client reference path, every client's report materialised (the deployed encoder);
- ``decode(release)``: unbiased per-level estimates and their per-count noise variance;
- ``measurement_noise(hist, n_draws, rng)``: fresh noise as the release got it (intervals).

What each release claims (relation, unit, sensitivity, noise, guarantee, DP event) is stated by
`fedeval.privacy.mechanism.Mechanism`, the single source every document and the ledger read.
"""

from __future__ import annotations

from types import ModuleType

from fedeval.core.config import PrivacyModel


def model_module(model: PrivacyModel) -> ModuleType:
    """The module that implements `model`."""
    from fedeval.privacy import distdp, federated, localdp

    return {
        PrivacyModel.FEDERATED: federated,
        PrivacyModel.DISTDP: distdp,
        PrivacyModel.LOCALDP: localdp,
    }[PrivacyModel(model)]
