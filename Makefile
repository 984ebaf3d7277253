# Two entry points set everything up from nothing: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test audit lint format bench sample clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Stamp files so a changed pyproject.toml triggers a reinstall.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/fedeval evaluate sample_data/scores.parquet --model distdp

# pytest exits 5 when it collects no tests: that is a failure here, not a pass.
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests were collected" >&2; exit 1; fi; exit $$rc

# The full privacy audit: T = 20,000 trials per side for every mechanism, then its table.
audit: $(VENV)/.installed-dev
	FEDEVAL_AUDIT=full $(BIN)/python -m pytest -q tests/audit
	$(BIN)/python benchmarks/audit.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m mypy fedeval

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
