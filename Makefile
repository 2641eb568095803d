# Two commands for a fresh machine: `make run` and `make test` (see README).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_VERSION ?= demo-1.0.0
HOST ?= 127.0.0.1:8000

.PHONY: install run test test-fast

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py import_pset benchmarks/demo --version $(DEMO_VERSION) --publish
	$(PY) manage.py demo_populate --version $(DEMO_VERSION)
	HOST=$(HOST) VENV=$(VENV) sh scripts/run.sh

test: install
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The fast loop: no browser, no Celery worker, no sandbox, no Docker (the full suite is `make test`).
test-fast: install
	$(VENV)/bin/pytest -m "not (browser or worker or sandbox or docker or slow)" $(PYTEST_ARGS)
