#!/usr/bin/env bash
# Runs every test of Roundtable: formatting, lints, unit, integration, crash and end-to-end
# tests, the UI's tests, and the desktop app in a real WebKit webview (under an X server of
# its own when there is no display). Installs what it needs first (Debian/Ubuntu), and can
# be run again at any time.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_packages build-essential pkg-config python3 python3-venv ca-certificates \
    "${DESKTOP_PACKAGES[@]}" "${DESKTOP_TEST_PACKAGES[@]}"
ensure_rust
ensure_node
ensure_tauri_driver
ensure_test_python
ensure_test_ccusage
ensure_test_agent_clis
ensure_ui_packages

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# The fake agent CLIs the tests drive write and print the real formats: check them first.
python3 tests/fixtures/agent-clis/selftest.py >/dev/null
# The UI: its types (Svelte 5 only), its unit tests, and the build the app embeds.
(cd ui && npm run --silent check && npm test --silent && npm run --silent build)
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
if command -v cargo-nextest >/dev/null; then
    cargo nextest run --workspace --locked --profile ci
    cargo test --workspace --locked --doc
else
    cargo test --workspace --locked
fi
echo "all tests passed"
