"""`python -m fedeval.cli`: the `fedeval` command."""

from fedeval.cli import main

if __name__ == "__main__":
    main()
