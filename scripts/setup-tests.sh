#!/usr/bin/env bash
# Everything the tests run on: Podman and the local image (setup-podman.sh), containerd and nerdctl for the
# containerd runtime, a registry for the pull specs, and a Debian image with systemd for the systemd runtime's
# specs. Idempotent; needs root (or sudo).
set -euo pipefail
here=$(dirname "$0")
bash "$here/setup-podman.sh"
bash "$here/setup-containerd.sh"
bash "$here/setup-registry.sh"
bash "$here/setup-systemd.sh"
