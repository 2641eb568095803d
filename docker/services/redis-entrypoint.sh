#!/bin/sh
# Redis for the broker and the cache: append-only file in /data, a password when REDIS_PASSWORD is set.
set -eu
if [ -n "${REDIS_PASSWORD:-}" ]; then
    exec redis-server --bind 0.0.0.0 --protected-mode no --dir /data --appendonly yes \
        --requirepass "$REDIS_PASSWORD" "$@"
fi
exec redis-server --bind 0.0.0.0 --protected-mode no --dir /data --appendonly yes "$@"
