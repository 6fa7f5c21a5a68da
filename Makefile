# holon — every target sets itself up: a fresh machine needs only Python 3.11+ and make.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint pytest bench eval golden docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,dev,tokenizer]'
	touch $(STAMP)

## demo: run holon's main job on the bundled example
demo: $(STAMP)
	$(PY) examples/daemon.py --fresh --ledger .demo/ledger
	$(VENV)/bin/holon verify .demo/ledger
	$(VENV)/bin/holon replay .demo/ledger --check
	$(VENV)/bin/holon render .demo/ledger

## test: the whole suite — lint (ruff, mypy --strict) then pytest
test: lint pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check holon tests benchmarks examples
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(VENV)/bin/pytest -n 2 -q

## bench: performance targets, each side by side with a baseline in the same run
bench: $(STAMP)
	$(PY) -m benchmarks

## eval: context quality and cost of holon against baseline policies (no LLM involved)
eval: $(STAMP)
	$(PY) -m benchmarks.eval

## golden: regenerate every golden file (review the diff; never edit by hand)
golden: $(STAMP)
	$(PY) -m tests.golden

## docs: regenerate docs/cli.md from the commands' --help output
docs: $(STAMP)
	$(PY) -m tests.cli_docs

clean:
	rm -rf $(VENV) .demo .pytest_cache .mypy_cache .ruff_cache build *.egg-info
