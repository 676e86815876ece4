# Sourced by scripts/test.sh: the outside checkers the suite runs, none of them written here.
# promtool (Debian's prometheus package, installed as root without starting its service) checks
# a live node's /metrics in the classic text format; Python's prometheus_client parses the
# OpenMetrics body and schemathesis tests the HTTP API against docs/openapi.yaml; mypy checks
# the Python client's types (lab/tests/clients.rs);
# kubernetes-validate checks the Kubernetes example (contrib/k8s/electd.yaml) against
# Kubernetes' own schemas (1.37.x carries those of Kubernetes 1.25 to 1.37); zsh, fish, elvish, man and
# groff check the shell completions and the man page; Go builds and tests the Go client. The Python
# packages go to a virtualenv of the project's own (target/py), whose bin/ goes first on PATH.
# What cannot be installed is reported, and the tests that need it print why and count as
# skipped.
need_checkers() {
  local who="$1" root="$2"
  if ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "$who: installing promtool (Debian's prometheus package; its service is not started)"
      local policy=/usr/sbin/policy-rc.d made=""
      if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && made=1
      fi
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends prometheus >/dev/null) \
        || echo "$who: could not install prometheus; the promtool check will be skipped"
      [ -n "$made" ] && rm -f "$policy"
    else
      echo "$who: no promtool and not root; the promtool check will be skipped"
    fi
  fi
  # zsh, fish, elvish, man-db and groff-base: the shells' parsers and man, which check `electd
  # completions` and `electd man` (tests/cli.rs; without them that test counts as skipped).
  local tool missing=()
  for tool in zsh:zsh fish:fish elvish:elvish man:man-db groff:groff-base; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "$who: installing ${missing[*]} (the completions and man page checks)"
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null) \
        || echo "$who: could not install ${missing[*]}; the completions and man page test will be skipped"
    else
      echo "$who: no ${missing[*]} and not root; the completions and man page test will be skipped"
    fi
  fi
  # Go: the Go client's vet and tests (lab/tests/clients.rs).
  if ! command -v go >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "$who: installing golang-go (the Go client's tests)"
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends golang-go >/dev/null) \
        || echo "$who: could not install golang-go; the Go client's test will be skipped"
    else
      echo "$who: no go and not root; the Go client's test will be skipped"
    fi
  fi
  if ! python3 -m venv --help >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "$who: installing python3 and its venv module"
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        python3 python3-venv >/dev/null) || true
    fi
  fi
  local venv="$root/target/py"
  if [ ! -x "$venv/bin/python3" ]; then
    python3 -m venv "$venv" >/dev/null 2>&1 || {
      echo "$who: no python3 venv; the Python checkers will be skipped"
      return 0
    }
  fi
  if ! "$venv/bin/python3" -c 'import prometheus_client, schemathesis, mypy' >/dev/null 2>&1; then
    echo "$who: installing prometheus_client, schemathesis and mypy into target/py"
    "$venv/bin/pip" install --quiet --disable-pip-version-check prometheus_client schemathesis mypy \
      || echo "$who: pip could not install them; the Python checkers will be skipped"
  fi
  if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q '^1\.37\.'; then
    echo "$who: installing kubernetes-validate 1.37 into target/py"
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'kubernetes-validate==1.37.*' \
      || echo "$who: pip could not install it; the Kubernetes manifest check will be skipped"
  fi
  export PATH="$venv/bin:$PATH"
}
