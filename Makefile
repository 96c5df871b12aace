# The two commands of the README: `make demo` and `make test`. Each creates .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DB ?= demo/archon-demo.db

.PHONY: demo test bench screenshots reference install clean

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

test: $(STAMP)
	$(BIN)/lint-imports --no-logo
	$(BIN)/python -m pytest -n 2 -q

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

reference: $(STAMP)
	$(BIN)/python -m console.cli.reference README.md

screenshots: $(STAMP)
	$(BIN)/python -m tests.make_screenshots

clean:
	rm -rf $(VENV) demo .pytest_cache
