"""What the documents claim, against what the code does (issue 23): the generator of private
noise, the δ of the samplers' floating point, the multiclass claim about counts, and the
declared facts that decide whether a release exists."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.privacy import generator
from fedeval.privacy.mechanism import Mechanism, mechanism_from_section
from fedeval.privacy.noise import discrete_laplace
from fedeval.protocol.simulate import rng_and_seed


def _config(model="distdp", **kw) -> PrivacyConfig:
    eps = {"distdp": 1.0, "localdp": 5.0}.get(model)
    return PrivacyConfig(PrivacyModel(model), 4, Shape.HIERARCHY, eps, **kw)


def test_private_noise_comes_from_a_cryptographic_generator():
    rng, seed = rng_and_seed(None)
    assert seed is None and type(rng.bit_generator).__name__ == "AESCounter"
    a, b = rng_and_seed(None)[0].random(4), rng_and_seed(None)[0].random(4)
    assert not np.array_equal(a, b)  # keyed afresh from the OS each run
    seeded, _ = rng_and_seed(7)
    assert type(seeded.bit_generator).__name__ == "PCG64"
    # A run spawns children from its generator (encode, two-phase runs): they stay AES-CTR.
    assert {type(g.bit_generator).__name__ for g in rng.spawn(3)} == {"AESCounter"}


def test_documents_name_the_generator():
    assert Mechanism(_config()).section()["randomness"] == generator.NAME
    assert Mechanism(_config(), seeded=True).section()["randomness"] == generator.SEEDED_NAME
    assert Mechanism(_config("federated", relation=None)).section()["randomness"] is None


def test_the_fast_sampler_caps_its_noise_where_stated():
    """The sampler can never draw beyond ±(⌈E_MAX/λ⌉ − 1): ±187 at α = 0.789. Its largest
    draw is E_MAX/λ rounded up, less the smallest other draw (1)."""
    alpha = 0.789
    assert generator.fast_sampler_bound(alpha) == 187
    x = discrete_laplace(alpha, 2_000_000, np.random.default_rng(1))
    assert np.abs(x).max() <= 187
    # E_MAX is the ziggurat's tail start plus −ln 2^-53: numpy's largest exponential draw.
    assert generator.E_MAX == pytest.approx(44.4339, abs=1e-3)


def test_every_distdp_guarantee_states_its_delta():
    for cfg in (_config(), _config(relation="replace"), _config(unit="client", max_examples=3)):
        mech = Mechanism(cfg)
        delta = mech.sampler_delta
        counts = sum(2 << k for k in cfg.levels)
        assert delta == pytest.approx((1 + math.e) * counts * 2.0**-51)
        assert 0 < delta < 1e-10
        text = mech.guarantee()
        assert f"δ = {delta:.1e}" in text and "(δ = 0)" not in text
        section = mech.section()
        assert section["sampler_delta"] == delta
        assert mechanism_from_section(section) == mech  # the stated δ reads back


def test_localdp_states_that_its_bits_are_taken_as_exact():
    text = Mechanism(_config("localdp")).guarantee()
    assert "53-bit floating point" in text and "does not account for" in text


def test_every_binary_claim_declares_what_decides_a_release():
    for cfg in (_config(), _config("localdp")):
        mech = Mechanism(cfg)
        assert "valid tables" in mech.guarantee() and "non-empty" in mech.guarantee()
        assert "minimum number of clients" in mech.analyst_learns()


def test_collusion_is_stated_without_the_knob_and_tolerated_with_it():
    plain = Mechanism(_config())
    assert "colludes with c of a cohort's m" in plain.guarantee()
    assert "no client of the cohort colludes" in plain.server_learns()
    knob = Mechanism(_config(colluders=2, cohort_floor=10))
    assert "up to 2 clients of each cohort" in knob.guarantee()
    assert knob.cohort_noise_variance == pytest.approx(plain.noise_variance * 10 / 8)
    assert knob.sampler_delta == pytest.approx(plain.sampler_delta * 10 / 8)
    assert mechanism_from_section(knob.section()) == knob
    with pytest.raises(Exception, match="below the minimum cohort"):
        _config(colluders=10, cohort_floor=10)
    with pytest.raises(Exception, match="distdp only"):
        _config("localdp", colluders=1, cohort_floor=10)


def test_multiclass_claim_agrees_with_the_cohort_size_it_states():
    """A FedTemp map states its cohort size (m = round(p·K)) and σ/K: the claim must declare
    K public and not say that no count of clients is released."""
    from fedeval.multiclass import calibrate_multiclass

    rng = np.random.default_rng(3)
    n, k = 2400, 3
    y = rng.integers(0, k, n)
    z = 3.0 * np.eye(k)[y] + rng.normal(0, 1.5, (n, k))
    r = calibrate_multiclass(
        y, logits=z, method="fedtemp", clients=60, epsilon=1.0, participation=0.5, rounds=4
    )
    doc = r.to_dict()
    privacy = doc["privacy"]
    assert "cohorts of m =" in privacy["mechanism"]["composition"]
    text = privacy["guarantee"]
    assert "no exact count of examples, clients" not in text
    assert "number K of enrolled clients is public" in text and "m = round(p·K)" in text
