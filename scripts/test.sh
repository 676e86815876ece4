#!/usr/bin/env bash
# The whole test suite: installs what the tests need beyond cargo, then formatting, clippy
# (-D warnings) and every test (unit, multi-process, chaos subset). Run from anywhere.
#
# It ends with one line per skip (`skipped: <test>: <reason>`) and then, last, the count:
# `suite: N passed, N failed, N skipped`. The tests are counted from nextest's summary; the other
# checks (fmt, clippy, kubernetes-validate, the promtool rules, the dashboard check, each fuzz
# target) as one step each. A skip is never a pass (issue 28): a test that skips records itself
# in $ELECTD_SKIPS_FILE (lab/src/skip.rs) and is counted as skipped although nextest shows it as
# PASS, and so are the steps of this script that could not run. Only a missing tool that cannot
# be installed here skips. The exit status is not 0 when anything failed, and on CI (CI=true)
# when anything was skipped, whoever runs it: CI must be able to install every tool, so a skip
# there means a broken install (issue 48, item 8: it failed only when CI ran as root).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

passed=0
failed=0
work="$(mktemp -d)"
export ELECTD_SKIPS_FILE="$work/skips"
: >"$ELECTD_SKIPS_FILE"
# Tests nextest reports as skipped (filtered out by arguments, or ignored): not run either.
nextest_skipped=0
step="setting up"
finished=""

pass() { passed=$((passed + 1)); echo "$1: ok"; }
fail() { failed=$((failed + 1)); echo "$1: FAILED${2:+ ($2)}"; }
skip() { printf '%s: %s\n' "$1" "$2" >>"$ELECTD_SKIPS_FILE"; echo "SKIPPED $1: $2"; }

# The names of the tests on nextest's status lines whose status matches the regex $1, one a
# line: `    PASS [   0.011s] (1/2) electd-lab skip::tests::…` gives `electd-lab skip::tests::…`.
nextest_names() {
  grep -E "^ *($1) \[" "$work/nextest.log" 2>/dev/null \
    | sed -E 's/^ *[A-Z0-9 -]+ \[[^]]*\] +(\( *[0-9]+\/[0-9]+\) +)?//' | sort -u
}

# The count, last, whatever stopped the script (set -e on a failed step included); removes the
# temp files (the skips file and the fuzz corpus are under $work).
report() {
  local status=$?
  trap - EXIT
  set +e
  if [ -z "$finished" ]; then
    # Stopped before the end: the step that was running failed (also when it exited 0 by a bug
    # of this script, which must not look like a pass).
    fail "$step" "test.sh stopped here, exit status $status"
  fi
  # A test that skipped is counted as skipped, not passed: once, however many parts of it
  # skipped. One that skipped a part and then failed is counted as failed only (by nextest).
  # A skip's name is what comes before its first ": " (test names hold no ": ").
  local skipped=0 name
  nextest_names 'PASS|TRY [0-9]+ PASS' >"$work/passed-tests"
  nextest_names 'FAIL|TRY [0-9]+ FAIL|TIMEOUT|SIG[A-Z]+|ABORT|LEAK-FAIL' >"$work/failed-tests"
  while IFS= read -r name; do
    if grep -qxF -- "$name" "$work/passed-tests"; then
      passed=$((passed - 1))
      skipped=$((skipped + 1))
    elif ! grep -qxF -- "$name" "$work/failed-tests"; then
      # A step of this script, or a test nextest did not get to.
      skipped=$((skipped + 1))
    fi
  done < <(sed 's/: .*//' "$ELECTD_SKIPS_FILE" | sort -u)
  if [ "$nextest_skipped" -gt 0 ]; then
    echo "nextest: $nextest_skipped tests not run (filtered out by the arguments, or ignored)" \
      >>"$ELECTD_SKIPS_FILE"
    skipped=$((skipped + nextest_skipped))
  fi
  local code=0
  [ "$failed" -eq 0 ] || code=1
  if [ "$skipped" -gt 0 ] && [ "${CI:-}" = true ]; then
    echo "test.sh: on CI (CI=true) a skip fails the suite, whoever runs it: CI must be able to install every tool"
    code=1
  fi
  sort -u "$ELECTD_SKIPS_FILE" | sed 's/^/skipped: /'
  rm -rf "$work"
  echo "suite: $passed passed, $failed failed, $skipped skipped"
  exit "$code"
}
trap report EXIT

# On CI (a clean clone, built once) incremental caches only take disk: about 3 GB of 12 once.
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0
fi
echo "disk: $(df -h . | awk 'NR==2 {print $4}') free at the start"

# iptables: the kernel fault layer of the chaos tests.
. "$root/scripts/lib/iptables.sh"
need_iptables test.sh
# PostgreSQL: mutex mode's store (lab/tests/mutex.rs, the chaos subset).
. "$root/scripts/lib/postgres.sh"
need_postgres test.sh
# libfaketime: a wall clock of its own for each test node (lab/tests/clock.rs).
. "$root/scripts/lib/faketime.sh"
need_faketime test.sh
# promtool, prometheus_client, schemathesis, kubernetes-validate: outside checkers of /metrics,
# the alert rules, the API and the Kubernetes examples.
. "$root/scripts/lib/checkers.sh"
need_checkers test.sh "$root"
# Chromium: the status page test (installed in the background while the suite builds).
. "$root/scripts/lib/chromium.sh"
start_chromium_install test.sh

# fmt and clippy stop the suite when they fail (the report still comes, by the trap).
step="cargo fmt --check"
echo "== $step"
cargo fmt --all -- --check
pass "$step"
# The Kubernetes examples (the plain one and the TLS variant) against Kubernetes' schemas,
# strictly (an unknown field fails), for the oldest and the newest version they are meant for.
# Every resource of each file must be checked: the tool only warns, and exits 0, on a kind it has
# no schema for. One step for both files.
manifests=(contrib/k8s/electd.yaml contrib/k8s/electd-tls.yaml)
step="kubernetes-validate"
echo "== kubernetes-validate --strict ${manifests[*]}"
kv="$root/target/py/bin/kubernetes-validate"
if ! "$kv" --version 2>/dev/null | grep -q '^1\.37\.'; then
  skip "$step" "kubernetes-validate 1.37 is not in target/py and could not be installed (see above)"
else
  k8s_ok=1
  for manifest in "${manifests[@]}"; do
    kinds="$(grep -c '^kind:' "$manifest" || true)"
    for k8s in 1.31.0 1.37.0; do
      if ! out="$("$kv" --strict -k "$k8s" "$manifest" 2>&1)"; then
        echo "$out"
        echo "kubernetes-validate: $manifest FAILED against Kubernetes $k8s"
        k8s_ok=""
        continue
      fi
      validated="$(grep -c 'passed for resource' <<<"$out" || true)"
      if [ "$validated" != "$kinds" ]; then
        echo "$out"
        echo "kubernetes-validate: $manifest FAILED against Kubernetes $k8s: $validated of its $kinds resources validated"
        k8s_ok=""
        continue
      fi
      echo "kubernetes-validate: $manifest ok against Kubernetes $k8s (--strict): $validated resources"
    done
  done
  if [ -n "$k8s_ok" ]; then pass "$step"; else fail "$step"; fi
fi
# The Prometheus rules of contrib/prometheus/: promtool checks them and runs their unit tests
# (each alert on synthetic series, a case that fires and one that does not). Skipped only when
# promtool is missing (need_checkers installs it as root).
rules=contrib/prometheus/electd-rules.yml
rule_tests=contrib/prometheus/electd-rules.test.yml
step="promtool rules"
echo "== promtool check rules $rules; promtool test rules $rule_tests"
if ! command -v promtool >/dev/null 2>&1; then
  skip "$step" "promtool is not installed and could not be installed (see above)"
elif promtool check rules "$rules" && promtool test rules "$rule_tests"; then
  echo "promtool: $(grep -c '^ *- alert:' "$rules") alerts, $(grep -c '^ *- record:' "$rules") records;" \
    "$(grep -c '^ *alertname:' "$rule_tests") alert checks and $(grep -c '^ *- expr:' "$rule_tests")" \
    "record checks in $(grep -c '^ *- name:' "$rule_tests") tests passed"
  pass "$step"
else
  fail "$step"
fi
# The Grafana dashboard of contrib/grafana/: valid JSON, a dashboard on a datasource variable,
# and, like the rules, naming only metrics src/metrics.rs exports or records of the rules file;
# and every alert tested both ways (scripts/lib/check_dashboard.py, Python's standard library).
step="dashboard and rules names"
echo "== scripts/lib/check_dashboard.py"
if ! command -v python3 >/dev/null 2>&1; then
  skip "$step" "python3 is not installed and could not be installed (see above)"
elif python3 "$root/scripts/lib/check_dashboard.py" --root "$root"; then
  pass "$step"
else
  fail "$step"
fi
# The ServiceMonitor beside the Kubernetes examples (a CRD kubernetes-validate has no schema
# for): the fields the Prometheus Operator reads, against the Service of contrib/k8s/electd.yaml.
step="servicemonitor"
echo "== scripts/lib/check_servicemonitor.py"
if ! command -v python3 >/dev/null 2>&1; then
  skip "$step" "python3 is not installed and could not be installed (see above)"
elif python3 "$root/scripts/lib/check_servicemonitor.py" "$root"; then
  pass "$step"
else
  fail "$step"
fi
step="cargo clippy"
echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The workspace builds the node with the lab's feature `flaws` on (the lab asks for it); the
# node alone, as `cargo install` and the package build it, has none of it: checked apart.
echo "== cargo clippy -p electd --lib --bins -- -D warnings (without the lab's flaws)"
cargo clippy -p electd --lib --bins --quiet -- -D warnings
pass "$step"
echo "== tests"
# nextest, not cargo test: its summary is what is counted, and its PASS lines tell which passes
# were skips (by the names lab/src/skip.rs writes). Installed if missing.
step="cargo-nextest"
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "test.sh: installing cargo-nextest"
  cargo install cargo-nextest --locked --quiet || true
fi
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "test.sh: cargo-nextest is not installed and could not be installed"
  exit 1
fi
# The lab's tests run the node binary (target/debug/electd) and the node with the lab's flaws
# beside it (target/debug/electd-flawed, lab/tests/broken.rs, which only the feature `flaws`
# builds): built once for the whole workspace, as nextest's build below takes them, and the
# package and image steps use it. (Built apart, `-p electd` alone and `-p electd --features
# flaws`, they were two more builds of the node, about 265 s on CI, which nextest's build then
# replaced: the workspace turns `flaws` on for the lab.) The node without the flaws is checked
# by clippy above; its flaw flag is inert in `electd` whatever the features (main.rs, `lab_flaws`).
step="cargo build --workspace --bins"
cargo build --quiet --workspace --bins
# The Debian package (cargo-deb, Cargo.toml's [package.metadata.deb]) from the binary just
# built, installed with dpkg -i and checked: `electd --version` names the commit, the default
# config passes --check-config as the package's user, `systemd-analyze verify` takes the
# installed unit without a word; then purged (the user and the config go with it).
step="debian package"
echo "== $step"
if ! cargo deb --version 2>/dev/null | grep -q '^cargo-deb 3\.8\.0$'; then
  echo "test.sh: installing cargo-deb 3.8.0"
  cargo install cargo-deb --version 3.8.0 --locked --quiet || true
fi
if [ "$(id -u)" != 0 ]; then
  skip "$step" "dpkg -i needs root"
elif ! cargo deb --version >/dev/null 2>&1 || ! command -v systemd-analyze >/dev/null; then
  skip "$step" "cargo-deb or systemd-analyze is not installed and could not be installed"
elif dpkg -s electd >/dev/null 2>&1; then
  fail "$step" "a package electd is installed on this machine already: not touched"
else
  deb_ok=1
  commit="$(git rev-parse --short=12 HEAD)"
  # --profile dev: the debug binary the tests use (a release build costs minutes on 2 cores).
  cargo deb -p electd --profile dev --no-build -o "$work/deb/" 2>&1 | grep -v 'dev profile' || true
  if ! dpkg -i "$work"/deb/electd_*.deb; then
    deb_ok=""
  else
    version="$(/usr/bin/electd --version)"
    echo "installed: $version"
    [[ "$version" == *"(commit $commit)"* ]] || { echo "the version names no commit $commit"; deb_ok=""; }
    runuser -u electd -- /usr/bin/electd --config /etc/electd/electd.toml --check-config \
      || { echo "the default config does not pass as user electd"; deb_ok=""; }
    verify="$(systemd-analyze verify /lib/systemd/system/electd.service 2>&1)" \
      || { echo "$verify"; deb_ok=""; }
    [ -z "$verify" ] || { echo "systemd-analyze verify: $verify"; deb_ok=""; }
  fi
  dpkg --purge electd >/dev/null 2>&1 || deb_ok=""
  if getent passwd electd >/dev/null || [ -e /usr/bin/electd ]; then
    echo "the purge left the user or the binary"
    deb_ok=""
  fi
  if [ -n "$deb_ok" ]; then pass "$step"; else fail "$step"; fi
fi
# The container image (contrib/container/build-image.sh): buildah from scratch, no registry,
# its storage in a directory of its own under $work; then the image run as a one-member node
# on a free port of 127.0.0.1 until it claims (at most 20 s), stopped by pid, and its data
# checked to be written by the image's user (uid 10001).
step="container image"
echo "== $step"
if ! command -v buildah >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "test.sh: installing buildah"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >/dev/null 2>&1 || true
fi
if ! command -v buildah >/dev/null || ! command -v curl >/dev/null; then
  skip "$step" "buildah or curl is not installed and could not be installed"
else
  img="$work/image"
  mkdir -p "$img/data"
  chown 10001:10001 "$img/data" 2>/dev/null || chmod 777 "$img/data"
  bargs="--root $img/storage --runroot $img/run --storage-driver vfs"
  image_ok=""
  if BUILDAH_ARGS="$bargs" bash contrib/container/build-image.sh target/debug/electd \
      electd:suite "$img/electd.oci"; then
    read -r -a bargv <<<"$bargs"
    ctr="$(buildah "${bargv[@]}" from electd:suite)"
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    BUILDAH_ISOLATION=chroot buildah "${bargv[@]}" run --network host \
      -v "$img/data:/var/lib/electd" "$ctr" -- /usr/bin/electd --config /etc/electd/electd.toml \
      --listen "127.0.0.1:$port" --peer "1=127.0.0.1:$port" >"$img/node.log" 2>&1 &
    node_pid=$!
    for _ in $(seq 1 200); do
      if curl -fs "http://127.0.0.1:$port/v1/claim" >/dev/null; then image_ok=1; break; fi
      sleep 0.1
    done
    kill -TERM "$node_pid" 2>/dev/null || true
    wait "$node_pid" 2>/dev/null || true
    owner="$(stat -c %u "$img/data/raft-state.0" 2>/dev/null || echo none)"
    echo "container image: $(du -h "$img/electd.oci" | cut -f1) OCI archive; the node in it \
claimed: ${image_ok:-no}; its data written by uid $owner"
    [ "$owner" = 10001 ] || image_ok=""
    [ -n "$image_ok" ] || tail -20 "$img/node.log"
    buildah "${bargv[@]}" rm -a >/dev/null 2>&1 || true
  fi
  rm -rf "$img"
  if [ -n "$image_ok" ]; then pass "$step"; else fail "$step"; fi
fi
step="tests"
wait_chromium_install test.sh
# The simulator's 450 schedules (lab/tests/sim.rs) start from a seed that changes per run.
export ELECTD_SIM_FIRST="${ELECTD_SIM_FIRST:-$(( $(date +%s) % 1000000 * 10000 ))}"
echo "simulator: seeds $ELECTD_SIM_FIRST..$(( ELECTD_SIM_FIRST + 449 )) (replay one: scripts/sim.sh --seed S)"
# Its status is taken, not left to set -e: failed tests are counted and the suite goes on.
set +e
cargo nextest run --workspace --no-fail-fast --failure-output final --color never "$@" 2>&1 \
  | tee "$work/nextest.log"
nextest_status=${PIPESTATUS[0]}
set -e
# `Summary [ 123.4s] 250 tests run: 248 passed, 2 failed, 3 skipped` (or `N/M tests run` when
# it stopped early): whatever ran and did not pass failed.
summary="$(grep -E '^ *Summary \[' "$work/nextest.log" | tail -1 || true)"
ran="$(sed -nE 's/.*\] *([0-9]+)(\/[0-9]+)? tests? run.*/\1/p' <<<"$summary")"
if [ -n "$ran" ]; then
  ok="$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)"
  nextest_skipped="$(grep -oE '[0-9]+ skipped' <<<"$summary" | grep -oE '[0-9]+' || echo 0)"
  passed=$((passed + ok))
  failed=$((failed + ran - ok))
  # The skipped tests are told from their PASS lines: they must all have been read.
  read_passes="$(nextest_names 'PASS|TRY [0-9]+ PASS' | wc -l)"
  if [ "$read_passes" -ne "$ok" ]; then
    fail "reading nextest's output" "$read_passes PASS lines for $ok passed tests"
  fi
  if [ "$nextest_status" -ne 0 ] && [ "$ran" -eq "$ok" ]; then
    fail "nextest" "exit status $nextest_status with every test passed"
  fi
else
  fail "nextest" "no summary line (a build failure?), exit status $nextest_status"
fi
step="fuzz"
echo "== fuzz (${ELECTD_FUZZ_SECONDS:=10} s a target)"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "test.sh: installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet || true
fi
targets=(peer_message config_text peer_auth)
if ! cargo fuzz --version >/dev/null 2>&1; then
  for target in "${targets[@]}"; do
    skip "fuzz:$target" "cargo-fuzz is not installed and could not be installed"
  done
else
  # The scratch corpus is under $work, which the EXIT trap removes.
  corpus="$work/corpus"
  for target in "${targets[@]}"; do
    step="fuzz:$target"
    mkdir -p "$corpus/$target"
    log="$corpus/$target.log"
    if ! (cd fuzz && cargo fuzz run --sanitizer none -O "$target" "$corpus/$target" "seeds/$target" \
          -- -max_total_time="$ELECTD_FUZZ_SECONDS" -print_final_stats=1) >"$log" 2>&1; then
      tail -40 "$log"
      if grep -q 'failed to build fuzz script' "$log"; then
        fail "$step" "the target did not build (its log is above)"
      else
        fail "$step" "input under fuzz/artifacts/$target/"
      fi
      continue
    fi
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
    cov="$(grep -o 'DONE *cov: [0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')"
    # A fuzz run that cannot say how many inputs it ran may have run none (issue 48, item 8).
    if [ -z "$runs" ] || [ "$runs" -eq 0 ]; then
      tail -20 "$log"
      fail "$step" "no count of inputs run in its log (${runs:-none}): it may have run nothing"
      continue
    fi
    echo "fuzz: $target: $runs inputs in ${ELECTD_FUZZ_SECONDS} s, coverage $cov, no crash"
    pass "$step"
  done
fi
# What the suite left on disk (CI's disk once filled up during the fuzz builds: stop 36).
echo "disk: target/ $(du -sh target 2>/dev/null | cut -f1), fuzz/target/ $(du -sh fuzz/target 2>/dev/null | cut -f1), $(df -h . | awk 'NR==2 {print $4}') free"
finished=1
