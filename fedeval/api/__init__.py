"""The library's entry points, one per task: evaluate, curves, calibrate, plan, and quality gates.
`fedeval` re-exports the public names; the CLI calls these with the same defaults."""
