# Sourced by the need_* helpers beside it: apt_install WHO PACKAGE WHY SKIPS installs Debian's
# PACKAGE as root (WHY says what for); without root or apt-get, or when the install fails, it
# says that SKIPS will be skipped (those tests print why and count as skipped).
apt_install() {
  local who="$1" pkg="$2" why="$3" skips="$4"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "$who: installing $pkg ($why)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null) \
      || echo "$who: could not install $pkg; $skips will be skipped"
  else
    echo "$who: no $pkg and not root; $skips will be skipped"
  fi
}
