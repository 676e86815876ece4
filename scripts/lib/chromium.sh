# Sourced by scripts/test.sh: makes sure Chromium (the status page test, lab/tests/page.rs) is
# there, installing Debian's package as root. The install runs in the background while the
# suite builds (start_chromium_install), and the tests wait for it (wait_chromium_install).
# Without it (or without root) the page test prints why and counts as skipped.
chromium_bin() {
  command -v chromium || command -v chromium-browser || command -v google-chrome || true
}

start_chromium_install() {
  chromium_pid=""
  if [ -n "$(chromium_bin)" ]; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "$1: installing chromium (status page test) in the background"
    chromium_log="$(mktemp)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
      >"$chromium_log" 2>&1 &
    chromium_pid=$!
  else
    echo "$1: no chromium and not root; the status page test will be skipped"
  fi
}

wait_chromium_install() {
  if [ -n "${chromium_pid:-}" ]; then
    wait "$chromium_pid" || { tail -5 "$chromium_log"; echo "$1: could not install chromium; the status page test will be skipped"; }
    rm -f "$chromium_log"
  fi
}
