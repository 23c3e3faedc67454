#!/usr/bin/env bash
# Installs what the containerd runtime needs: containerd, runc and the CNI plugins from Debian's packages, and
# nerdctl v2.0.3 built from the Go module proxy; starts containerd when it is not running (no systemd here)
# and loads the local busybox image into it (no registry is needed). Idempotent; needs root (or sudo) and the
# local image of scripts/setup-podman.sh (scripts/setup-tests.sh runs both).
set -euo pipefail
SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
IMAGE=localhost/busybox:latest
NERDCTL=v2.0.3
NERDCTL_BIN=/usr/local/bin/nerdctl

if ! command -v containerd >/dev/null || [ ! -x /usr/lib/cni/bridge ] || ! command -v iptables >/dev/null; then
  echo "setup-containerd: installing containerd containernetworking-plugins iptables"
  apt_install containerd containernetworking-plugins iptables
fi

if ! "$NERDCTL_BIN" --version 2>/dev/null | grep -q "${NERDCTL#v}"; then
  GO=$(command -v go || echo /usr/local/go/bin/go)
  # Not `go install …@v2.0.3`: it reads the module's version list for deprecation notices, which the module
  # proxy here refuses (403). The checksum database is not reachable either; nerdctl's own go.sum pins every
  # dependency it is built with.
  dir=$(GONOSUMDB=github.com/containerd/nerdctl "$GO" mod download -json "github.com/containerd/nerdctl/v2@$NERDCTL" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { echo "setup-containerd: the module proxy did not serve nerdctl $NERDCTL" >&2; exit 1; }
  echo "setup-containerd: building nerdctl $NERDCTL"
  (cd "$dir" && CGO_ENABLED=0 "$GO" build -ldflags "-X github.com/containerd/nerdctl/v2/pkg/version.Version=$NERDCTL" -o "$NERDCTL_BIN.new" ./cmd/nerdctl)
  $SUDO mv "$NERDCTL_BIN.new" "$NERDCTL_BIN"
fi

if ! $SUDO ctr version >/dev/null 2>&1; then
  echo "setup-containerd: starting containerd"
  $SUDO mkdir -p /var/log
  $SUDO setsid nohup containerd >>/var/log/containerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 50); do $SUDO ctr version >/dev/null 2>&1 && break; sleep 0.2; done
  $SUDO ctr version >/dev/null 2>&1 || { echo "setup-containerd: containerd did not start (see /var/log/containerd.log)" >&2; exit 1; }
fi

if ! $SUDO "$NERDCTL_BIN" image inspect "$IMAGE" >/dev/null 2>&1; then
  $SUDO podman save "$IMAGE" | $SUDO "$NERDCTL_BIN" load >/dev/null
  echo "setup-containerd: loaded $IMAGE into containerd"
fi

# Only the container's output is checked: the CLI may log to stderr after it ("forward signal child exited").
errors=$(mktemp)
out=$($SUDO "$NERDCTL_BIN" run --rm "$IMAGE" /bin/echo containerd-ok 2>"$errors") || { echo "setup-containerd: run failed: $(cat "$errors")" >&2; rm -f "$errors"; exit 1; }
rm -f "$errors"
[ "$out" = containerd-ok ] || { echo "setup-containerd: unexpected output: $out" >&2; exit 1; }
echo "setup-containerd: nerdctl $NERDCTL runs $IMAGE on containerd $($SUDO ctr version 2>/dev/null | awk '/Server/{s=1} s&&/Version/{print $2; exit}')"
