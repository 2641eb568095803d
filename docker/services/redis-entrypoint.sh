#!/bin/sh
# Redis for the broker and the cache: append-only file in /data, a password when REDIS_PASSWORD is set. The
# password goes into a configuration file only this user reads, so it never shows in the process list.
set -eu
config="$(mktemp)"
chmod 600 "$config"
{
    echo "bind 0.0.0.0"
    echo "protected-mode no"
    echo "dir /data"
    echo "appendonly yes"
    if [ -n "${REDIS_PASSWORD:-}" ]; then
        echo "requirepass \"$REDIS_PASSWORD\""
    fi
} >"$config"
exec redis-server "$config" "$@"
