# Two commands for a fresh machine: `make run` and `make test` (see README).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_VERSION ?= demo-1.0.0
HOST ?= 127.0.0.1:8000
# Test workers (pytest-xdist; tests/parallel.py says what each has of its own): 2 on the 2-core machine CI runs on.
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadgroup
# The suite starts some 200 Python processes (its workers, Celery workers, manage.py): each compiled the project and
# its packages from source again where PYTHONDONTWRITEBYTECODE is set (as on this machine; uv's install writes
# no bytecode). Kept in the virtualenv, out of the tree (no __pycache__ beside a package's files), a Celery worker
# starts on 1.3-1.5 s of CPU instead of 3.5-3.8 s, and a test worker collects on 8 s instead of 22 s. Sandboxed code
# is not affected: the sandboxes set their own environment.
PYTEST_BYTECODE := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache

.PHONY: install install-lint lint run test test-fast

# uv installs the same pinned packages from the same index as pip, 4-9 times faster here (pip 255 s, uv 28 s with
# its cache, 64 s without: `python3 scripts/time_first_page.py --install-only --installer pip|uv`); pip installs
# uv itself into the virtualenv, so a fresh machine needs nothing more. INSTALLER=pip installs with pip alone.
INSTALLER ?= uv
ifeq ($(INSTALLER),uv)
INSTALL := $(VENV)/bin/pip install --quiet uv && $(VENV)/bin/uv pip install --quiet --python $(VENV)/bin/python
else
INSTALL := $(VENV)/bin/pip install --quiet
endif

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(INSTALL) -e '.[test]'
	touch $@

install: $(VENV)/.installed

$(VENV)/.lint-installed: pyproject.toml $(VENV)/.installed
	$(INSTALL) -e '.[lint]'
	touch $@

install-lint: $(VENV)/.lint-installed

run: install
	$(PY) manage.py demo_start --version $(DEMO_VERSION)  # migrate, import_pset --publish, demo_populate --background
	HOST=$(HOST) VENV=$(VENV) sh scripts/run.sh

test: install
	$(PYTEST_BYTECODE) $(VENV)/bin/pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# The fast loop: no browser, no Celery worker, no sandbox, no Docker (the full suite is `make test`).
test-fast: install
	$(PYTEST_BYTECODE) $(VENV)/bin/pytest $(PYTEST_PARALLEL) -m "not (browser or worker or sandbox or docker or slow)" $(PYTEST_ARGS)

# Lint and types (CI runs this before the tests). The formatter's output is applied to the whole tree once, at the
# merge of the branches that introduced it (`ruff format .`); until then `ruff format --check` lists what it would change.
lint: install-lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
