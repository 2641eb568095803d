#!/bin/sh
# Start a Celery worker (embedded filesystem broker unless CELERY_BROKER_URL says otherwise) and the web server;
# stopping the server (Ctrl-C) stops the worker too.
set -eu
VENV="${VENV:-.venv}"
HOST="${HOST:-127.0.0.1:8000}"
"$VENV/bin/celery" -A config worker --loglevel INFO --queues default,llm,sandbox --concurrency 2 &
WORKER=$!
trap 'kill $WORKER 2>/dev/null; wait $WORKER 2>/dev/null' EXIT INT TERM
"$VENV/bin/python" manage.py runserver "$HOST"
