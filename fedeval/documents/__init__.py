"""Versioned JSON documents on disk and their seals: release files, calibration maps, and the
consistency checks a saved release must pass, whoever wrote it."""
