# sparkfn: `make demo` runs the main job, `make test` runs every check.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install browser console demo demo-cluster test test-both-stores check lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The console's npm packages, as package-lock.json pins them: the tests check
# that the committed build (src/sparkfn/worker/console_dist) is what they make.
CONSOLE_DEPS := console/node_modules/.package-lock.json
$(CONSOLE_DEPS): console/package-lock.json
	@if command -v npm >/dev/null; then cd console && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the console's build check will not run (install Node.js 20.19+)"; fi

# Debian's Chromium, which the console's browser tests drive (never a downloaded browser).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "Installing Debian's chromium for the console's browser tests (apt-get)"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends chromium) \
		|| echo "could not install chromium: the browser tests will not run (they fail under CI=true)"; \
	fi

install: $(STAMP) $(CONSOLE_DEPS) browser

# Rebuild the console after changing console/src (commit the result).
console: $(CONSOLE_DEPS)
	cd console && npm run build

demo: $(STAMP)
	$(PY) examples/demo.py

# Three workers on PostgreSQL and a local Spark standalone cluster: a killed
# worker's function goes on elsewhere. Needs failover (issue 37) to pass.
demo-cluster: $(STAMP)
	$(PY) examples/demo_cluster.py

lint: $(STAMP)
	$(PY) -m ruff check src tests examples benchmarks
	$(PY) -m ruff format --check src tests examples benchmarks

typecheck: $(STAMP)
	$(PY) -m mypy

# Three workers, each with its own SparkSession: the run keeps both cores
# about 90% busy, and the third worker fills the gaps while the long crash
# tests wait on their child processes. The slowest tests are listed at the
# end, so CI logs show where the time goes.
# --dist loadgroup: the tests of one xdist_group run on one worker, one after
# another (the broker tests: tests/connectors/test_broker_restart.py restarts
# the brokers the others use).
unit: install
	$(PY) -m pytest -q -n 3 --dist loadgroup --durations=15

# The whole suite: lint, types, tests. CI runs exactly this.
test: lint typecheck unit

# Every Spark test on both store backends too (tests/conftest.py): about twice
# the time of `make unit`, so not part of `make test`.
test-both-stores: install
	SPARKFN_TESTS_BOTH_BACKENDS=1 $(PY) -m pytest -q -n 3 --dist loadgroup --durations=15

# Every benchmark, one after another (never two Spark processes at once: on
# two cores they skew each other). Shorter runs take flags per script, e.g.
# make bench FUNCTIONS_FLAGS="--messages 100000 --repeats 1" LATENCY_FLAGS="--seconds 10"
bench: $(STAMP)
	$(PY) benchmarks/producer.py $(PRODUCER_FLAGS)
	$(PY) benchmarks/topics.py $(TOPICS_FLAGS)
	$(PY) benchmarks/functions.py $(FUNCTIONS_FLAGS)
	$(PY) benchmarks/functions.py --scaling $(FUNCTIONS_FLAGS)
	$(PY) benchmarks/latency.py $(LATENCY_FLAGS)
	$(PY) benchmarks/density.py $(DENSITY_FLAGS)
	$(PY) benchmarks/density.py --functions 200 --active-rate 5 --active-seconds 60 $(ACTIVE_FLAGS)
	$(PY) benchmarks/density.py --functions 101 --active-rate 5 --hot-rate 20000 $(HOT_FLAGS)
	$(PY) benchmarks/connectors.py $(CONNECTORS_FLAGS)

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
