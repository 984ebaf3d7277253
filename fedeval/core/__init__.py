"""The shared ground every step stands on: errors, privacy configuration, the score axis, the
dyadic hierarchy, parameter choices, the release and its decoded histogram, result values."""
