# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup demo test test-pure test-cluster test-faults lint docs chromium clean update-constraints measurements

# Installs come from constraints.txt: the versions the suite passed on (README: Installs). PIP_CONSTRAINT
# reaches the isolated build of the package too (setuptools, wheel).
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(BIN)/python -m pip install --quiet --upgrade pip
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(BIN)/python -m pip install --quiet -e '.[all]'
	@touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/raytune-fed demo --out results/demo

# The cluster tests (`ray up` over ssh to a node on this machine, Ray's autoscaler with its
# fake multi-node provider) and the fault tests (workers, site actors and `ray start` nodes killed
# mid-grid; each workflow's command stopped and resumed on another CPU count) take minutes each:
# `make test-cluster` and `make test-faults` run them, `.ci/run` all three.
# Two pytest-xdist workers: the Ray and process tests in order on one (the one shared Ray session), the pure
# tests on the other (tests/conftest.py's scheduler).
test: $(STAMP) chromium
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup -m "not cluster and not faults"

# lint: ruff's rules (pyproject.toml [tool.ruff]) on the package, tests and examples; mypy on the package.
lint: $(STAMP)
	$(BIN)/ruff check raytune_fed tests examples
	$(BIN)/mypy

# measurements regenerates docs/measurements.md (the measurement history) from experiments/measured/*.json;
# tests/test_experiments_layout.py fails while the committed page differs from a fresh generation.
measurements:
	$(PYTHON) tools/measurements.py

# docs: the API reference generated from the docstrings (sources in docs/api) into docs/_build/api. Nitpicky,
# warnings as errors: a reference to a raytune_fed name that does not exist fails the build (.ci/run runs it).
docs: $(STAMP)
	$(BIN)/sphinx-build -E -W --keep-going -n -q -b html docs/api docs/_build/api

test-pure: $(STAMP)
	$(BIN)/python -m pytest -q -m "not ray and not process"

test-cluster: $(STAMP)
	$(BIN)/python -m pytest -q -m cluster

test-faults: $(STAMP)
	$(BIN)/python -m pytest -q -m faults

# The report-page tests open the pages in headless Chromium (tests/browser.py): Debian's
# chromium and chromium-driver, installed here when missing if make runs as root with
# apt-get; otherwise make names them and stops before the suite starts.
chromium:
	@if command -v chromedriver >/dev/null 2>&1 && { command -v chromium || command -v chromium-browser \
	        || command -v google-chrome; } >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing Debian's chromium and chromium-driver (the report-page tests need them)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else \
	    echo "make: the report-page tests need headless Chromium and chromedriver; install them" \
	         "(Debian: sudo apt-get install chromium chromium-driver) and run make test again" >&2; \
	    exit 1; \
	fi

# update-constraints moves the pins forward on purpose: a throw-away venv gets the newest releases that
# pyproject.toml admits, constraints.txt is rewritten from it, the project's venv is rebuilt from the new
# file and the whole suite runs. Commit constraints.txt only when that passes (README: Installs).
update-constraints:
	rm -rf .venv-update
	$(PYTHON) -m venv .venv-update
	.venv-update/bin/python -m pip install --quiet --upgrade pip setuptools wheel
	.venv-update/bin/python -m pip install --quiet '.[all]'
	{ sed -n '1,/^# pip, setuptools/p' constraints.txt; \
	  .venv-update/bin/python -m pip freeze --all --exclude-editable \
	      | grep -E '^(pip|setuptools|wheel)=='; \
	  .venv-update/bin/python -m pip freeze --exclude-editable | grep -v -i '^raytune-fed' | grep -v '^#'; \
	} > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .venv-update $(VENV)
	$(MAKE) test test-cluster test-faults

# clean removes build debris and caches; it never touches results/ (grid outputs).
clean:
	rm -rf .pytest_cache build *.egg-info docs/_build
