#!/usr/bin/env bash
# Build the Debian base image for one suite with debootstrap and import it into the local Docker engine.
# Used when no image registry answers; the Dockerfile then starts FROM this local tag like any other base.
set -euo pipefail
suite=${1:?usage: base-image.sh SUITE (bookworm|trixie|sid)}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
tag="slurmx-base:${suite}"
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag already present"
  exit 0
fi
work=$(mktemp -d "/var/tmp/slurmx-rootfs-${suite}.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "debootstrap $suite into $work (about 2 minutes)"
debootstrap --variant=minbase --include=ca-certificates "$suite" "$work/root" "$mirror" >"$work.log" 2>&1 || {
  echo "debootstrap $suite failed; last lines of $work.log:" >&2; tail -5 "$work.log" >&2; exit 1; }
rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
tar -C "$work/root" -c . | docker import - "$tag" >/dev/null
echo "imported $tag"
