#!/bin/bash
# Build the sandbox base image without a container registry: debootstrap a minimal Debian (the host's release,
# from the host's own apt mirror) into a rootfs tarball, `docker import` it, then add the sandbox user and
# layout with ./Dockerfile on top. Does nothing if the image exists, unless --force.
#
#   docker/sandbox-base/build.sh [--force] [--fresh]
#     --force   rebuild the image even if it exists (reusing the cached rootfs tarball)
#     --fresh   also debootstrap again instead of reusing the cached tarball (implies --force)
#
# Environment: SANDBOX_DOCKER_BASE_IMAGE (the tag, default rcb-sandbox-base:<release>), SANDBOX_CACHE_DIR
# (default var/sandbox; the tarball lives in its base/ folder).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

force=0
fresh=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        --fresh) force=1; fresh=1 ;;
        *) echo "usage: $0 [--force] [--fresh]" >&2; exit 2 ;;
    esac
done

. /etc/os-release
release="${VERSION_CODENAME:?this host is not Debian-like: no VERSION_CODENAME in /etc/os-release}"
arch="$(dpkg --print-architecture)"
image="${SANDBOX_DOCKER_BASE_IMAGE:-rcb-sandbox-base:$release}"
rootfs_image="rcb-sandbox-rootfs:$release"
cache="${SANDBOX_CACHE_DIR:-$REPO/var/sandbox}/base"
# python3-venv brings ensurepip (and its bundled pip wheel), enough to build environments in /opt/env.
include="python3,python3-venv,ca-certificates"
# The name changes with what goes into the rootfs, so a cached tarball of another recipe is never reused.
recipe="$include apt-sources-kept"
tarball="$cache/debian-$release-$arch-minbase-$(echo "$recipe" | sha256sum | cut -c1-12).tar"

if [[ $force == 0 ]] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "$image exists (use --force to rebuild)"
    exit 0
fi

command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }

# The mirror is whatever this host's apt already uses for its release: read at run time, never written here.
mirror_find() {
    apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' 2>/dev/null |
        awk -v release="$release" '$2 == release && $3 == "main" { print $1; exit }'
}

if [[ $fresh == 1 || ! -s $tarball ]]; then
    mirror="$(mirror_find)"
    if [[ -z $mirror ]]; then
        apt-get update -qq
        mirror="$(mirror_find)"
    fi
    [[ -n $mirror ]] || { echo "no apt source for '$release main' is configured on this host" >&2; exit 1; }

    mkdir -p "$cache"
    root="$(mktemp -d "$cache/rootfs.XXXXXX")"
    # debootstrap mounts proc and sys inside the target; a failed run may leave them there.
    cleanup() {
        umount -l "$root/proc" "$root/sys" 2>/dev/null || true
        rm -rf --one-file-system "$root" "$tarball.partial"
    }
    trap cleanup EXIT
    echo "debootstrap $release ($arch, minbase + $include) from the host's apt mirror"
    debootstrap --variant=minbase --arch="$arch" --include="$include" \
        "$release" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
        { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
    # Lists and caches go; apt's sources stay for the service images built on this rootfs (docker/services),
    # and the sandbox layer (./Dockerfile) drops them, since sandboxes install nothing at run time.
    rm -rf "$root"/var/lib/apt/lists/* \
        "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old "$root"/var/log/* \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
    : >"$root/etc/resolv.conf"
    # mktemp made the folder 0700; as the image's / it would lock the sandbox user out (vfs keeps it as is).
    chmod 0755 "$root"
    tar --numeric-owner -C "$root" -cf "$tarball.partial" \
        --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* --exclude=./run/* --exclude=./tmp/* .
    mv "$tarball.partial" "$tarball"
    cleanup
    trap - EXIT
fi

# The images a rebuild replaces; removed afterwards unless environment images still stand on them.
replaced="$(docker image inspect --format '{{.Id}}' "$image" "$rootfs_image" 2>/dev/null || true)"

echo "importing $tarball as $rootfs_image"
docker import "$tarball" "$rootfs_image" >/dev/null
docker build --force-rm --build-arg "ROOTFS=$rootfs_image" --tag "$image" "$HERE" >"$cache/build.log" 2>&1 ||
    { tail -20 "$cache/build.log" >&2; exit 1; }
for id in $replaced; do docker rmi "$id" >/dev/null 2>&1 || true; done
echo "built $image"
