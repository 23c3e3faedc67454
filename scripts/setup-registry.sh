#!/usr/bin/env bash
# Installs a real image registry for the pull specs: Debian's docker-registry (the CNCF distribution). The specs
# start it themselves, on a loopback port with a store of their own, and push their images there; nothing runs
# after this script. Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
if ! command -v docker-registry >/dev/null; then
  echo "setup-registry: installing docker-registry"
  # Its package would start a registry as a service where systemd runs: the specs want none running.
  apt_install --no-install-recommends docker-registry
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then $SUDO systemctl disable --now docker-registry >/dev/null 2>&1 || true; fi
fi
echo "setup-registry: $(docker-registry --version 2>/dev/null | awk '{print $1, $3}')"
