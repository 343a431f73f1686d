# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup demo test test-pure test-cluster clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all]'
	@touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/raytune-fed demo --out results/demo

# The cluster tests (`ray up` over ssh to a node on this machine, Ray's autoscaler with its
# fake multi-node provider) take minutes each: `make test-cluster` runs them, `.ci/run` both.
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not cluster"

test-pure: $(STAMP)
	$(BIN)/python -m pytest -q -m "not ray and not process"

test-cluster: $(STAMP)
	$(BIN)/python -m pytest -q -m cluster

# clean removes build debris and caches; it never touches results/ (grid outputs).
clean:
	rm -rf .pytest_cache build *.egg-info
