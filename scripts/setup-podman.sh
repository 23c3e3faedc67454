#!/usr/bin/env bash
# Installs and configures Podman from Debian's packages and builds the local busybox image the
# examples and tests use (no registry is needed): what the quick start needs. The tests need more
# (scripts/setup-tests.sh). Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
IMAGE=localhost/busybox:latest

need=()
for cmd in podman runc busybox; do command -v "$cmd" >/dev/null || need+=("$cmd");  done
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup-podman: installing podman runc busybox-static openssl"
  apt_install podman runc busybox-static openssl
fi

# crun fails on cgroup v1 "hybrid" hosts; Podman's default rlimits can exceed the host's hard limits.
nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
[ "$nofile" = unlimited ] && nofile=1048576
[ "$nproc" = unlimited ] && nproc=1048576
nofile=$(( nofile < 20000 ? nofile : 20000 )); nproc=$(( nproc < 32768 ? nproc : 32768 ))
$SUDO mkdir -p /etc/containers
conf=/etc/containers/containers.conf
want=$(printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n\n[engine]\nruntime = "runc"\n' "$nofile" "$nofile" "$nproc" "$nproc")
if [ ! -f "$conf" ] || ! grep -q 'runtime = "runc"' "$conf"; then
  [ -f "$conf" ] && $SUDO cp "$conf" "$conf.before-ank-agent"
  echo "$want" | $SUDO tee "$conf" >/dev/null
  echo "setup-podman: wrote $conf (runtime runc, ulimits nofile=$nofile nproc=$nproc)"
fi

if ! $SUDO podman image exists "$IMAGE"; then
  root=$(mktemp -d)
  mkdir -p "$root/bin" "$root/sbin" "$root/tmp" "$root/etc" "$root/proc" "$root/sys" "$root/dev" "$root/run"
  cp "$(command -v busybox)" "$root/bin/busybox"
  for applet in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
  done
  echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
  echo 'root:x:0:' > "$root/etc/group"
  tar -C "$root" -c . | $SUDO podman import --quiet --change 'ENV PATH=/bin:/sbin' --change 'CMD ["/bin/sh"]' - "$IMAGE" >/dev/null
  rm -rf "$root"
  echo "setup-podman: built $IMAGE from Debian's busybox-static"
fi

# A quick end-to-end check, so a broken set-up shows here and not in the middle of the tests.
# Only the container's output is checked: the CLI may log to stderr after it ("forward signal child exited").
errors=$(mktemp)
out=$($SUDO podman run --rm "$IMAGE" /bin/echo podman-ok 2>"$errors") || { echo "setup-podman: run failed: $(cat "$errors")" >&2; rm -f "$errors"; exit 1; }
rm -f "$errors"
[ "$out" = podman-ok ] || { echo "setup-podman: unexpected output: $out" >&2; exit 1; }
echo "setup-podman: podman $(podman --version | awk '{print $3}') works with $IMAGE"
