"""`python -m fedeval`: the `fedeval` command."""

from fedeval.cli import main

main()
