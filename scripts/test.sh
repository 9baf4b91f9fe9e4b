#!/usr/bin/env bash
# Runs every test of Roundtable: formatting, lints, unit, integration, crash and end-to-end
# tests. Installs what it needs first (Debian/Ubuntu), and can be run again at any time.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_packages build-essential pkg-config python3 python3-venv ca-certificates
# Node.js with npm, for ccusage: Debian's packages, unless a Node.js is there already (some
# distributions of it bring their own npm, which Debian's would conflict with).
command -v npm >/dev/null || ensure_packages nodejs npm
ensure_rust
ensure_test_python
ensure_test_ccusage

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# The fake agent CLIs the tests drive write and print the real formats: check them first.
python3 tests/fixtures/agent-clis/selftest.py >/dev/null
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
if command -v cargo-nextest >/dev/null; then
    cargo nextest run --workspace --locked --profile ci
    cargo test --workspace --locked --doc
else
    cargo test --workspace --locked
fi
echo "all tests passed"
