"""`python -m fedeval.cli`: the `fedeval` command."""

from fedeval.cli import main

main()
