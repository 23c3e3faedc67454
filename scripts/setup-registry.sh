#!/usr/bin/env bash
# Installs a real image registry for the pull specs: Debian's docker-registry (the CNCF distribution). The specs
# start it themselves, on a loopback port with a store of their own, and push their images there; nothing runs
# after this script. Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
if ! command -v docker-registry >/dev/null; then
  echo "setup-registry: installing docker-registry"
  # Another apt at work (an upgrade at boot) is waited for, not a reason to fail.
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  # Its package would start a registry as a service where systemd runs: the specs want none running.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends docker-registry >/dev/null
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then $SUDO systemctl disable --now docker-registry >/dev/null 2>&1 || true; fi
fi
echo "setup-registry: $(docker-registry --version 2>/dev/null | awk '{print $1, $3}')"
