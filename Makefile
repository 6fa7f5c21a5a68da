# holon — every target sets itself up: a fresh machine needs only Python 3.11+ and make.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint pytest browser bench eval golden docs lock test-newest test-lowest lint-lowest clean

# Everything comes from requirements.lock, every file checked against its hash; holon
# itself is installed on top with nothing resolved again, and pip check proves the lock
# satisfies pyproject.toml's ranges. docs/dependencies.md says how the lock is made.
$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	touch $(STAMP)

## demo: run holon's main job on the bundled example
demo: $(STAMP)
	$(PY) examples/daemon.py --fresh --ledger .demo/ledger
	$(VENV)/bin/holon verify .demo/ledger
	$(VENV)/bin/holon replay .demo/ledger --check
	$(VENV)/bin/holon render .demo/ledger

## test: the whole suite — lint (ruff, mypy --strict) then pytest
test: lint pytest

## test-fast: the edit loop — lint, then every test not marked slow (crash loops, long sessions)
test-fast: lint
	$(VENV)/bin/pytest -n 2 -q -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check holon tests benchmarks examples
	$(VENV)/bin/mypy

# tests/test_report.py loads report pages in headless Chromium: here the browser is required
# (HOLON_REQUIRE_BROWSER=1 turns its skip into a failure), so a CI machine without it fails.
pytest: $(STAMP) browser
	HOLON_REQUIRE_BROWSER=1 $(VENV)/bin/pytest -n 2 -q

## browser: install headless Chromium and its driver (apt, as root) when they are missing
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	else \
		echo "make: chromium and chromedriver are missing and cannot be installed here (root and apt-get" \
			"needed): install chromium and chromium-driver, or tests/test_report.py fails" >&2; \
	fi

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

## lock: refresh requirements.lock to the newest releases pyproject.toml allows; says what moved
lock: $(STAMP)
	.ci/lock $(VENV)/bin/uv

## test-newest: the whole suite against the newest release of every dependency (no lock)
test-newest:
	$(PYTHON) -m venv .venv-newest
	.venv-newest/bin/python -m pip install --quiet --upgrade pip
	.venv-newest/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[test,dev,tokenizer]'
	.venv-newest/bin/python -m pip list --format=freeze | grep -iE '^(msgspec|zstandard|blake3|xxhash|click|duckdb|bpe-openai|pytest|hypothesis|pytest-xdist|pyarrow|polars|mypy|ruff)=='
	.venv-newest/bin/ruff check holon tests benchmarks examples
	.venv-newest/bin/mypy
	.venv-newest/bin/pytest -n 2 -q

## test-lowest: pytest against the lowest release pyproject.toml allows of each direct dependency
test-lowest: $(STAMP)
	$(VENV)/bin/uv venv --quiet --allow-existing --python $(PYTHON) .venv-lowest
	$(VENV)/bin/uv pip compile pyproject.toml --extra test --extra tokenizer --resolution lowest-direct \
		--python-version 3.11 --quiet --output-file .venv-lowest/requirements.txt
	$(VENV)/bin/uv pip sync --quiet --python .venv-lowest/bin/python .venv-lowest/requirements.txt
	$(VENV)/bin/uv pip install --quiet --no-deps --python .venv-lowest/bin/python -e .
	grep -E '^[a-z].*==' .venv-lowest/requirements.txt
	.venv-lowest/bin/pytest -n 2 -q

## lint-lowest: ruff and mypy at the lowest release the dev extra allows, all else as locked
lint-lowest: $(STAMP)
	$(VENV)/bin/uv venv --quiet --allow-existing --python $(PYTHON) .venv-lint-lowest
	grep -E '^[A-Za-z0-9._-]+==' requirements.lock | sed -E 's/ *\\$$//' | grep -vE '^(mypy|ruff|uv)==' \
		> .venv-lint-lowest/constraints.txt
	$(VENV)/bin/uv pip compile pyproject.toml --extra test --extra dev --extra tokenizer --resolution lowest-direct \
		--constraint .venv-lint-lowest/constraints.txt --python-version 3.11 --quiet \
		--output-file .venv-lint-lowest/requirements.txt
	$(VENV)/bin/uv pip sync --quiet --python .venv-lint-lowest/bin/python .venv-lint-lowest/requirements.txt
	$(VENV)/bin/uv pip install --quiet --no-deps --python .venv-lint-lowest/bin/python -e .
	grep -E '^(mypy|ruff|uv)==' .venv-lint-lowest/requirements.txt
	.venv-lint-lowest/bin/ruff check --no-cache holon tests benchmarks examples
	.venv-lint-lowest/bin/mypy --cache-dir .venv-lint-lowest/mypy-cache

clean:
	rm -rf $(VENV) .venv-newest .venv-lowest .venv-lint-lowest .demo .pytest_cache .mypy_cache .ruff_cache build *.egg-info
