"""The audit's scenarios build the configuration they claim to audit: typed, validated fields."""

from __future__ import annotations

import pytest

from fedeval import audit
from fedeval.audit.scenarios import all_scenarios
from fedeval.core.config import Relation, Unit
from fedeval.core.errors import UsageError


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.name)
def test_scenario_config_holds_the_enums_of_its_unit_and_relation(scenario):
    cfg = scenario.config()
    assert cfg.unit is Unit(scenario.unit)
    assert cfg.relation is Relation(scenario.relation)
    assert cfg.examples_per_unit == (scenario.max_examples or 1)


def test_a_misspelt_scenario_is_refused_by_name():
    with pytest.raises(UsageError, match="unknown unit 'clients'"):
        audit.Scenario("distdp", "add-remove", "clients", 2).config()
    with pytest.raises(UsageError, match="add_remove"):
        audit.Scenario("distdp", "add_remove").config()
