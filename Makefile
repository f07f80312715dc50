# sparkfn: `make demo` runs the main job, `make test` runs every check.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install demo test check lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

lint: $(STAMP)
	$(PY) -m ruff check src tests examples benchmarks
	$(PY) -m ruff format --check src tests examples benchmarks

typecheck: $(STAMP)
	$(PY) -m mypy

# Three workers: most of the suite waits on JVM starts and child processes,
# not on the two cores; each worker has its own SparkSession.
unit: $(STAMP)
	$(PY) -m pytest -q -n 3

# The whole suite: lint, types, tests. CI runs exactly this.
test: lint typecheck unit

bench: $(STAMP)
	$(PY) benchmarks/topics.py
	$(PY) benchmarks/functions.py

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
