# The two commands of the README: `make demo` and `make test`. Each creates .venv when missing.
# `make test-fast` is the loop to run while working: every test not marked `slow` (docs/architecture.md, "Two test commands").
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DB ?= demo/archon-demo.db

.PHONY: demo test test-fast bench screenshots reference install clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@mkdir -p $(dir $(DEMO_DB))
	$(BIN)/archon-console demo $(DEMO_DB) --overwrite --seed 7
	$(BIN)/archon-console --db $(DEMO_DB)

# PYTHONDONTWRITEBYTECODE (set by some shells and containers) is emptied for the tests: without
# __pycache__ every worker compiles and assertion-rewrites every test module again (about 5 s of CPU
# each) and every console process the tests start compiles the console again.
# The fleet tests run real sshd (tests/fleet/sshd.py); where it cannot be provisioned they skip, saying why.
test: $(STAMP)
	-tests/fleet/provision_sshd.sh
	$(BIN)/lint-imports --no-logo
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 2 -q

# No separate lint-imports: tests/test_layers.py::test_import_contracts_hold (a fast test) runs it.
# The five slowest fast tests over 1 s are listed at the end: one that stays there belongs in `slow`.
test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 2 -q -m "not slow" --durations=5 --durations-min=1

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

reference: $(STAMP)
	$(BIN)/python -m console.cli.reference README.md

screenshots: $(STAMP)
	$(BIN)/python -m tests.make_screenshots

clean:
	rm -rf $(VENV) demo .pytest_cache
