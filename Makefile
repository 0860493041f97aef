# The two commands: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-fast bench lint schema-lint schema-snapshot clean-data

$(STAMP): pyproject.toml clients/python/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (set PYTHON=...)")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]" -e "clients/python[langchain,llamaindex]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m console.run

# Both run on TEST_WORKERS processes (pytest-xdist; each its own test database, a test file's
# tests together; 0: one process), files in the order tests/conftest.py gives them: the longest first.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: $(STAMP)
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The edit loop: everything but the browser, real-worker and fuzzing lanes.
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" $(XDIST) $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) bench/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The published API contract (docs/openapi.json): refresh it after an additive schema change;
# tests/project/test_schema_snapshot.py fails on a breaking one.
schema-snapshot: $(STAMP)
	$(PY) manage.py spectacular --format openapi-json --file docs/openapi.json

clean-data:
	rm -rf .console
