# Sourced by scripts/test.sh and scripts/chaos.sh: makes sure iptables (the kernel fault layer
# of the chaos runs) is there, installing Debian's package as root. Without it (or without
# root) the kernel-layer runs print why and count as skipped.
need_iptables() {
  if command -v iptables >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "$1: installing iptables (kernel fault layer)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables >/dev/null) \
      || echo "$1: could not install iptables; kernel-layer runs will be skipped"
  else
    echo "$1: no iptables and not root; kernel-layer runs will be skipped"
  fi
}
