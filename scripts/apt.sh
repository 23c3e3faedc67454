# Sourced by the set-up scripts (after they set SUDO): Debian's packages installed, another apt at work (an
# upgrade at boot, a second install beside this one) waited for up to ten minutes rather than a reason to fail.
# `install` waits for dpkg's lock itself; `update` does not wait for its lists' lock, so it is tried again.

apt_install() {
  local out tries=0
  until out=$($SUDO apt-get update -qq 2>&1); do
    tries=$((tries + 1))
    if [[ "$out" != *"Could not get lock"* || $tries -ge 60 ]]; then
      echo "$out" >&2
      return 1
    fi
    sleep 10
  done
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}
