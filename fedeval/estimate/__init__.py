"""Estimators: everything here is post-processing of one decoded release (or, for `exact`, of the
raw scores a simulation holds)."""
