#!/bin/bash
# What `make compose-test` needs of this machine, set up once: podman (with runc, cgroupfs and file events, the
# settings a host without systemd needs), docker-compose (which talks to podman's API socket) and a Debian bookworm
# base image made by debootstrap from Debian's mirror, for hosts that reach no image registry. The base trusts what this
# host trusts (its own CAs in /usr/local/share/ca-certificates, such as an egress proxy's), so builds reach Maven
# Central and PyPI from it as the host does. Hosts with Docker and the official images need none of this:
# `docker compose up -d` builds from debian:bookworm-slim.
set -euo pipefail
BASE_IMAGE=${1:-localhost/microingest-base:bookworm}
# netavark sets up containers' networks with iptables, which a minimal host may lack ("netavark: No such file or
# directory" at the first `up`).
packages=(podman runc fuse-overlayfs slirp4netns uidmap netavark aardvark-dns iptables debootstrap docker-compose ca-certificates)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing podman and friends (missing: ${missing[*]})"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# netavark (with aardvark-dns) rather than CNI, which without its dnsname plugin gives containers no names to find
# each other by.
conf=/etc/containers/containers.conf
if ! grep -qs '^network_backend = "netavark"' "$conf"; then
  mkdir -p "$(dirname "$conf")"
  cat >>"$conf" <<'CONF'
# microingest (docker/podman-setup.sh): no systemd here, and a cgroup v1 host.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[network]
network_backend = "netavark"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
  echo "configured podman in $conf"
fi
if ! podman image exists "$BASE_IMAGE"; then
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  echo "making the base image $BASE_IMAGE (debootstrap, about a minute)"
  debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" >/dev/null
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
  fi
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  # pip in Debian's venv reads its own CA bundle unless told the system's.
  tar -C "$rootfs" -c . | podman import --quiet --change "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt" - \
    "$BASE_IMAGE" >/dev/null
  echo "made $BASE_IMAGE"
fi
