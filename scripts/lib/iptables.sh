# Sourced by scripts/test.sh and scripts/chaos.sh: makes sure iptables (the kernel fault layer
# of the chaos runs) is there, installing Debian's package as root. Without it (or without
# root) the kernel-layer runs print why and count as skipped.
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
need_iptables() {
  if command -v iptables >/dev/null 2>&1; then
    return 0
  fi
  apt_install "$1" iptables "kernel fault layer" "kernel-layer runs"
}
