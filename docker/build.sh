#!/bin/bash
# Build every image of the compose stack without a container registry: the sandbox base and the Debian rootfs
# (debootstrap, from this host's apt mirror), then PostgreSQL, Redis and the application from docker-compose.yml.
# This host's extra CAs are trusted by the builds (docker/ca-certificates/README.md).
#   docker/build.sh [compose build options...]     (RCB_ENV_FILE=path: settings from there instead of .env)
set -euo pipefail
cd "$(dirname "$0")/.."
docker/sandbox-base/build.sh
for cert in /usr/local/share/ca-certificates/*.crt; do
    [[ -f $cert ]] && cp "$cert" docker/ca-certificates/
done
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
[[ -n ${RCB_ENV_FILE:-} ]] && compose+=(--env-file "$RCB_ENV_FILE")
"${compose[@]}" build "$@"
