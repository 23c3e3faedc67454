#!/usr/bin/env bash
# Makes the Debian image with systemd the systemd runtime's specs run as a container (these machines do not run
# systemd as their first process; Podman runs it as the container's): debootstrap's minimal Debian with systemd
# and dbus from Debian's packages, imported as localhost/systemd:bookworm. Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
IMAGE=localhost/systemd:bookworm
if ! $SUDO podman image exists "$IMAGE"; then
  if ! command -v debootstrap >/dev/null; then
    echo "setup-systemd: installing debootstrap"
    apt_install debootstrap
  fi
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\/*\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  root=$(mktemp -d)
  trap '$SUDO rm -rf "$root"' EXIT
  echo "setup-systemd: debootstrap of Debian bookworm with systemd (about a minute and a half)"
  $SUDO debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,libstdc++6 bookworm "$root" ${mirror:-http://deb.debian.org/debian} >/dev/null
  # The units the specs drive are theirs; nothing else of the image's needs to start or wake (apt's and the
  # clean-up's timers), and the journal stays in memory rather than syncing to the container's overlay.
  $SUDO rm -f "$root"/etc/systemd/system/*.wants/systemd-timesyncd.service "$root"/etc/systemd/system/timers.target.wants/*
  $SUDO mkdir -p "$root"/etc/systemd/journald.conf.d
  printf '[Journal]\nStorage=volatile\n' | $SUDO tee "$root"/etc/systemd/journald.conf.d/volatile.conf >/dev/null
  $SUDO tar -C "$root" -c . | $SUDO podman import --quiet --change 'CMD ["/sbin/init"]' - "$IMAGE" >/dev/null
  echo "setup-systemd: built $IMAGE"
fi
echo "setup-systemd: $IMAGE is there"
