#!/usr/bin/env bash
# Runs every test of Roundtable: formatting, lints, unit, integration, crash and end-to-end
# tests, the UI's tests, the desktop app in a real WebKit webview (under an X server of its
# own when there is no display), and the Windows and macOS builds' lints and the Windows
# tests that run under Wine. Installs what it needs first (Debian/Ubuntu), and can
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
ensure_test_interop_clients
ensure_test_agent_clis
ensure_ui_packages
ensure_test_postgres
ensure_test_nats
ensure_windows_cross
ensure_macos_check

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# A first build (a fresh clone, as in CI) gains nothing from incremental compilation, which
# would write several GiB of its own beside the build: CI once ran out of disk.
if [ ! -d target/debug ] && [ -z "${CARGO_INCREMENTAL:-}" ]; then
    export CARGO_INCREMENTAL=0
fi
# The fake agent CLIs the tests drive write and print the real formats: check them first.
python3 tests/fixtures/agent-clis/selftest.py >/dev/null
# The UI: its types (Svelte 5 only), its unit tests, and the build the app embeds.
(cd ui && npm run --silent check && npm test --silent && npm run --silent build)
cargo fmt --all -- --check
# One build for the lints and the tests. Clippy wraps rustc for the workspace's own crates
# (as `cargo clippy` does, through the same two variables) and fails the build on any
# warning, so the dependencies are compiled once, for the tests, instead of being checked
# for clippy first and built again. The benches are linted by building them (nextest does
# not build them).
export RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
if [ ! -x "$RUSTC_WORKSPACE_WRAPPER" ]; then
    echo "clippy is missing: \`rustup component add clippy\`, then run this again" >&2
    exit 1
fi
export CLIPPY_ARGS="-Dwarnings"
# The installable package, in a debug build the package test installs and opens (a person
# builds the release one: see the README).
cargo build --locked -p roundtable-cli
(cd src-tauri && PATH="$PWD/../ui/node_modules/.bin:$PATH" tauri build --debug --bundles deb --ci \
    --config '{"bundle":{"linux":{"deb":{"files":{"/usr/bin/roundtable":"../target/debug/roundtable"}}}}}')
if command -v cargo-nextest >/dev/null; then
    cargo nextest run --workspace --locked --profile ci
    # The hub's integration suite again, each hub keeping its data in PostgreSQL; then each
    # hub being three processes sharing a database, the tests' clients spread over them.
    # Two tests look at one process alone there: its memory gauges (a process's memory
    # catches up on the others' changes at its next write) and max_devices (a bound per
    # process in a cluster, docs/scaleout.md).
    ROUNDTABLE_TEST_HUB_STORE=postgres cargo nextest run -p roundtable-hub --test it --locked --profile ci \
        -E 'not test(/^cluster::/)'
    ROUNDTABLE_TEST_HUB_STORE=cluster cargo nextest run -p roundtable-hub --test it --locked --profile ci \
        -E 'not (test(/^cluster::/) | test(=memory::what_is_decided_leaves_the_writers_memory_and_stays_out_after_a_restart) | test(=bounds::a_principal_past_max_devices_gets_busy_and_1013))'
else
    cargo test --workspace --locked
    ROUNDTABLE_TEST_HUB_STORE=postgres cargo test -p roundtable-hub --test it --locked
    ROUNDTABLE_TEST_HUB_STORE=cluster cargo test -p roundtable-hub --test it --locked -- \
        --skip cluster:: --skip memory::what_is_decided --skip bounds::a_principal_past_max_devices
fi
cargo build --workspace --benches --locked --features roundtable-desktop/bench-peer
# Windows and macOS (docs/platforms.md): the crates that build for both, linted for both with
# warnings as errors (macOS checked only: there is no Apple SDK here to link with), and the
# Windows tests of those that pass under Wine, run there.
CROSS=(-p roundtable-platform -p roundtable-protocol -p roundtable-hub -p roundtable-core
    -p roundtable-cli -p roundtable-testkit)
cargo clippy --locked --target x86_64-pc-windows-gnu "${CROSS[@]}" --all-targets -- -D warnings
cargo-zigbuild clippy --locked --target aarch64-apple-darwin "${CROSS[@]}" --all-targets -- -D warnings
env INSTA_WORKSPACE_ROOT="$WINDOWS_WORKSPACE" \
    cargo test --locked --target x86_64-pc-windows-gnu -p roundtable-platform -p roundtable-protocol
echo "all tests passed"
