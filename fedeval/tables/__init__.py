"""Scored tables in and out: reading and validating Parquet/CSV input within bounds, the scored
data a simulation holds, and a run's output files (prepared first, committed together)."""
