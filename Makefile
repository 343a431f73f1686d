# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup demo test test-pure test-cluster test-faults clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all]'
	@touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/raytune-fed demo --out results/demo

# The cluster tests (`ray up` over ssh to a node on this machine, Ray's autoscaler with its
# fake multi-node provider) and the fault tests (workers, site actors and `ray start` nodes killed
# mid-grid; each workflow's command stopped and resumed on another CPU count) take minutes each:
# `make test-cluster` and `make test-faults` run them, `.ci/run` all three.
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not cluster and not faults"

test-pure: $(STAMP)
	$(BIN)/python -m pytest -q -m "not ray and not process"

test-cluster: $(STAMP)
	$(BIN)/python -m pytest -q -m cluster

test-faults: $(STAMP)
	$(BIN)/python -m pytest -q -m faults

# clean removes build debris and caches; it never touches results/ (grid outputs).
clean:
	rm -rf .pytest_cache build *.egg-info
