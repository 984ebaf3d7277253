"""Privacy models: one module each, with the same four functions.

- ``draw(leaf_counts, n_clients, config, population, rng)``: the fast path, the aggregate drawn
  directly with the distribution of the sum of all client reports;
- ``client_reports(cells, labels, client, n_clients, config, population, rng)``: the per-client
  reference path, every client's report materialised (the deployed encoder);
- ``decode(release)``: unbiased per-level estimates and their per-count noise variance;
- ``describe(config, population)``: the mechanism and its parameters, for the report.
"""

from __future__ import annotations

from types import ModuleType

from fedeval.config import PrivacyModel


def mechanism_for(model: PrivacyModel) -> ModuleType:
    """The module that implements `model`."""
    from fedeval.privacy import distdp, federated, localdp

    return {
        PrivacyModel.FEDERATED: federated,
        PrivacyModel.DISTDP: distdp,
        PrivacyModel.LOCALDP: localdp,
    }[PrivacyModel(model)]
