#!/usr/bin/env bash
# The whole test suite: installs what the tests need beyond cargo, then formatting, clippy
# (-D warnings) and every test (unit, multi-process, chaos subset). Run from anywhere.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

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
# the API and the Kubernetes example.
. "$root/scripts/lib/checkers.sh"
need_checkers test.sh "$root"
# Chromium: the status page test (installed in the background while the suite builds).
. "$root/scripts/lib/chromium.sh"
start_chromium_install test.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
# The Kubernetes example against Kubernetes' schemas, strictly (an unknown field fails), for the
# oldest and the newest version it is meant for. Every resource of the file must be checked: the
# tool only warns, and exits 0, on a kind it has no schema for.
manifest=contrib/k8s/electd.yaml
echo "== kubernetes-validate --strict $manifest"
kv="$root/target/py/bin/kubernetes-validate"
if ! "$kv" --version 2>/dev/null | grep -q '^1\.37\.'; then
  echo "SKIPPED kubernetes-validate: 1.37 is not in target/py and could not be installed (see above)"
else
  kinds="$(grep -c '^kind:' "$manifest" || true)"
  for k8s in 1.31.0 1.37.0; do
    if ! out="$("$kv" --strict -k "$k8s" "$manifest" 2>&1)"; then
      echo "$out"
      echo "kubernetes-validate: $manifest FAILED against Kubernetes $k8s"
      exit 1
    fi
    passed="$(grep -c 'passed for resource' <<<"$out" || true)"
    if [ "$passed" != "$kinds" ]; then
      echo "$out"
      echo "kubernetes-validate: $manifest FAILED against Kubernetes $k8s: $passed of its $kinds resources validated"
      exit 1
    fi
    echo "kubernetes-validate: $manifest ok against Kubernetes $k8s (--strict): $passed resources"
  done
fi
echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== tests"
# The lab's tests run the node binary (target/debug/electd): build it first.
cargo build --quiet --bin electd
wait_chromium_install test.sh
# The simulator's 600 schedules (lab/tests/sim.rs) start from a seed that changes per run.
export ELECTD_SIM_FIRST="${ELECTD_SIM_FIRST:-$(( $(date +%s) % 1000000 * 10000 ))}"
echo "simulator: seeds $ELECTD_SIM_FIRST..$(( ELECTD_SIM_FIRST + 599 )) (replay one: scripts/sim.sh --seed S)"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast --failure-output final "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi

# Fuzzing (README, "Hardening"): each target of fuzz/ (src/fuzzing.rs) for a bounded time, from the seeds in
# fuzz/seeds/ plus a scratch corpus in a temp dir. cargo-fuzz runs here on the stable toolchain
# with --sanitizer none (libFuzzer's coverage guidance, no ASan; the code is safe Rust).
# A crash fails the suite and leaves its input under fuzz/artifacts/<target>/.
echo "== fuzz (${ELECTD_FUZZ_SECONDS:=20} s a target)"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "test.sh: installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet || true
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "SKIPPED fuzz: cargo-fuzz is not installed and could not be installed"
else
  corpus="$(mktemp -d)"
  trap 'rm -rf "$corpus"' EXIT
  for target in peer_message config_text peer_auth; do
    mkdir -p "$corpus/$target"
    log="$corpus/$target.log"
    if ! (cd fuzz && cargo fuzz run --sanitizer none -O "$target" "$corpus/$target" "seeds/$target" \
          -- -max_total_time="$ELECTD_FUZZ_SECONDS" -print_final_stats=1) >"$log" 2>&1; then
      tail -40 "$log"
      echo "fuzz: $target FAILED (input under fuzz/artifacts/$target/)"
      exit 1
    fi
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')"
    cov="$(grep -o 'DONE *cov: [0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')"
    echo "fuzz: $target ok: $runs inputs in ${ELECTD_FUZZ_SECONDS} s, coverage $cov, no crash"
  done
fi
