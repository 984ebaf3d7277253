"""How results are shown: the versioned JSON report, rich tables, CSV and figures."""
