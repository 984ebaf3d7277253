# Two entry points set everything up from nothing: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast audit lint format bench sample clean

# pip installs without byte-compiling (most of an install's CPU goes to compiling modules no
# command imports: Flower's simulation engine alone has thousands), and Python writes the
# bytecode of what is imported, once, on first import, even where the environment says not to.
PIP = $(BIN)/python -m pip install --quiet --no-compile
unexport PYTHONDONTWRITEBYTECODE

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Stamp files so a changed pyproject.toml triggers a reinstall.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/fedeval evaluate sample_data/scores.parquet --model distdp

# The Flower extra too, so that its tests (tests/test_flower*.py) run rather than skip: one pip
# run for both extras (a second resolve after `.[dev]` cost a fresh clone about a minute).
$(VENV)/.installed-flower: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[dev,flower]'
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed

# pytest exits 5 when it collects no tests: that is a failure here, not a pass.
# `make test` runs every test and the library's doctests, over WORKERS processes (pytest-xdist;
# one per core this process may use, `nproc`; WORKERS=0 runs in this process); `make test-fast`
# leaves out the tests marked slow. A worker is handed one test at a time (--maxschedchunk 1),
# the slow ones first (tests/conftest.py): the long tests start early and no worker waits at the
# end on a queue the other one emptied.
WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
# Bytecode is cached even where the environment sets PYTHONDONTWRITEBYTECODE: the suite starts
# dozens of Python processes (xdist workers, CLI and Flower subprocesses, Ray workers), and each
# would otherwise compile numpy, pandas, scipy and fedeval from source again (≈ 1.2 CPU-s each).
PYTEST = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(WORKERS) --maxschedchunk 1
NONE_COLLECTED = rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests were collected" >&2; exit 1; fi; exit $$rc

test: $(VENV)/.installed-flower
	$(PYTEST); $(NONE_COLLECTED)

test-fast: $(VENV)/.installed-flower
	$(PYTEST) -m "not slow"; $(NONE_COLLECTED)

# The full privacy audit: T = 20,000 trials per side for every mechanism, then its table.
audit: $(VENV)/.installed-dev
	FEDEVAL_AUDIT=full $(BIN)/python -m pytest -q tests/audit
	$(BIN)/python benchmarks/audit.py

# Ruff; mypy --strict on all of fedeval/ (pyproject's [tool.mypy]); the import
# graph's layers, no circles, no module over 600 lines (tests/test_layers.py, static).
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m mypy fedeval
	$(BIN)/python -m pytest -q -p no:cacheprovider -o addopts="" tests/test_layers.py; $(NONE_COLLECTED)

format: $(VENV)/.installed-dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/accuracy.py
	$(BIN)/python benchmarks/speed.py

sample: $(VENV)/.installed-dev
	$(BIN)/python sample_data/make_sample.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
