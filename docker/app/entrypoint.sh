#!/bin/sh
# The application image's commands:
#   web                  migrate, load the demo release and the maintainer (site_init), then serve with gunicorn
#   worker QUEUES        a Celery worker for a comma-separated list of queues (default, llm, sandbox)
#   healthcheck          web: GET /healthz; worker: answers a ping
#   manage ARGS...       python manage.py ARGS...
#   anything else        run as given
set -eu
cd /app
command="${1:-web}"
[ $# -gt 0 ] && shift
case "$command" in
    web)
        python manage.py migrate --noinput
        python manage.py site_init
        exec gunicorn config.wsgi --bind 0.0.0.0:8000 --workers "${WEB_CONCURRENCY:-3}" \
            --timeout "${WEB_TIMEOUT:-60}" --access-logfile - --forwarded-allow-ips '*'
        ;;
    worker)
        queues="${1:?usage: worker QUEUES (comma-separated: default, llm, sandbox)}"
        # Commas separate names in Celery's --destination, so the node name joins the queues with dashes.
        name="${WORKER_NAME:-$(echo "$queues" | tr , -)@$(cat /etc/hostname)}"
        echo "$name" >/tmp/worker-name
        # No gossip, mingle or heartbeat events: the platform uses none, and restarting gossip after a broker
        # restart delayed the worker's reconnection (and the watchdog's recovery) by half a minute.
        exec celery -A config worker --queues "$queues" --concurrency "${WORKER_CONCURRENCY:-2}" \
            --hostname "$name" --loglevel "${LOG_LEVEL:-INFO}" --without-gossip --without-mingle --without-heartbeat
        ;;
    healthcheck)
        if [ -f /tmp/worker-name ]; then
            exec celery -A config inspect ping --destination "$(cat /tmp/worker-name)" --timeout 10 >/dev/null
        fi
        exec python docker/app/healthcheck.py
        ;;
    manage)
        exec python manage.py "$@"
        ;;
    *)
        exec "$command" "$@"
        ;;
esac
