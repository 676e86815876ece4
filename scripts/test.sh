#!/usr/bin/env bash
# The whole test suite: installs what the tests need beyond cargo, then formatting, clippy
# (-D warnings) and every test (unit, multi-process, chaos subset). Run from anywhere.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# iptables: the kernel fault layer of the chaos tests. Without it (or without root) those
# tests print why and count as skipped.
if ! command -v iptables >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing iptables (kernel fault layer)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables >/dev/null) \
      || echo "test.sh: could not install iptables; kernel-layer tests will be skipped"
  else
    echo "test.sh: no iptables and not root; kernel-layer tests will be skipped"
  fi
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings
echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --no-fail-fast --failure-output final "$@"
else
  cargo test --no-fail-fast "$@"
fi
