#!/bin/sh
# Start the web server, then a Celery worker (embedded filesystem broker unless CELERY_BROKER_URL says otherwise);
# stopping the server (Ctrl-C) stops the worker too. The server starts first: the first page does not wait for the
# sandbox check and the worker's start (the home page says which runs are still scoring).
set -eu
VENV="${VENV:-.venv}"
HOST="${HOST:-127.0.0.1:8000}"
# A real sandbox where the machine has one. SANDBOX_BACKEND=auto refuses to run untrusted code without one, so on a
# machine with neither Docker nor bubblewrap this development server falls back to `local`, explicitly and loudly.
# The web server runs no submitted code (the worker does), so it starts before the check, and the check waits for
# its first answer: on two cores the three starts competing for them delayed the first page by half a minute.
# --skip-checks: demo_start's migrate has just run them; --noreload: the reloader's parent process set Django up a
# second time before the first page (run `manage.py runserver` yourself to reload on every edit).
"$VENV/bin/python" manage.py runserver --noreload --skip-checks "$HOST" &
SERVER=$!
WORKER=""
# Stopping: the server, then the worker with RUN_STOP_GRACE seconds to finish (a warm shutdown), then SIGKILL to its
# process group. The worker runs in a session of its own, so Ctrl-C or a TERM to this script's group reaches only
# its main process, through here: a group signal that also killed its pool processes left the main process in
# "Warm shutdown" for good, deaf to a second TERM and to QUIT (its tasks are redelivered on the next start).
GRACE="${RUN_STOP_GRACE:-5}"
stop() {
    trap - EXIT INT TERM
    kill "$SERVER" 2>/dev/null || true
    if [ -n "$WORKER" ]; then
        kill -TERM "$WORKER" 2>/dev/null || true
        (sleep "$GRACE"; kill -KILL -"$WORKER" 2>/dev/null || kill -KILL "$WORKER" 2>/dev/null) &
        KILLER=$!
        wait "$WORKER" 2>/dev/null || true
        kill "$KILLER" 2>/dev/null || true
        kill -KILL -"$WORKER" 2>/dev/null || true # any pool process its main process left behind
    fi
    wait 2>/dev/null || true
}
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
"$VENV/bin/python" - "$HOST" <<'PY' || true
import sys, time, urllib.error, urllib.request
host, _, port = sys.argv[1].rpartition(":")
host = "127.0.0.1" if host in ("", "0.0.0.0", "0", "[::]") else host
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        urllib.request.urlopen(f"http://{host}:{port}/", timeout=30).close()  # the first request imports the views
        break
    except urllib.error.HTTPError:  # answered, if with an error page: the server is up
        break
    except OSError:
        time.sleep(0.2)
PY
status=0
"$VENV/bin/python" manage.py sandbox_check || status=$?
if [ "$status" -eq 3 ]; then
    printf '%s\n' \
        "################################################################################################################" \
        "WARNING: neither Docker nor bubblewrap works on this machine, so \`make run\` sets SANDBOX_BACKEND=local:" \
        "submitted tests and model answers run WITHOUT ANY ISOLATION, as your user, on this machine. Only for" \
        "development with code you trust. Install Docker or bubblewrap (see sandbox_check above) for a real sandbox." \
        "################################################################################################################" >&2
    SANDBOX_BACKEND=local
    export SANDBOX_BACKEND
elif [ "$status" -ne 0 ]; then
    echo "SANDBOX_BACKEND names a sandbox that does not work here (see above); fix it or unset it." >&2
    exit "$status"
fi
SESSION=""
command -v setsid >/dev/null 2>&1 && SESSION=setsid # a background job of this script is no group leader: no fork
# No gossip, mingle or heartbeat events (docker/app/entrypoint.sh says why).
$SESSION "$VENV/bin/celery" -A config worker --loglevel INFO --queues default,llm,sandbox --concurrency 2 \
    --without-gossip --without-mingle --without-heartbeat &
WORKER=$!
wait "$SERVER"
