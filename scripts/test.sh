#!/usr/bin/env bash
# Runs every test of Roundtable: formatting, lints, unit, integration, crash and end-to-end
# tests, the UI's tests, the desktop app in a real WebKit webview (under an X server of its
# own when there is no display), the Windows and macOS builds' lints, the Windows tests
# that run under Wine, and the app's Windows executable and installer, checked under Wine.
# Installs what it needs first (Debian/Ubuntu; on macOS, Homebrew's after Apple's command
# line tools), and can be run again at any time.
#
# On macOS the same tests run but those only Linux can: the desktop app in a webview driven
# over WebDriver (WebKitGTK's driver) with its package (a .deb), and the Windows and macOS
# cross-builds with the Windows tests under Wine (docs/platforms.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

if on_macos; then
    ensure_macos_tools
    ensure_brew python3
else
    ensure_packages build-essential pkg-config python3 python3-venv ca-certificates \
        "${DESKTOP_PACKAGES[@]}" "${DESKTOP_TEST_PACKAGES[@]}"
fi
ensure_rust
ensure_node
on_macos || ensure_tauri_driver
ensure_test_python
ensure_test_ccusage
ensure_test_interop_clients
ensure_test_agent_clis
ensure_ui_packages
ensure_test_postgres
ensure_test_nats
if ! on_macos; then
    ensure_windows_cross
    ensure_macos_check
fi

# Each phase's time, for docs/benchmarks.md.
phase() { echo "phase done at ${SECONDS}s: $1" >&2; }
phase "setup"
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
# The scripts: sourced variables are used where they are sourced (SC2034), and common.sh is
# followed from the repository's root (SC1091).
if ! on_macos; then
    ensure_packages shellcheck
    shellcheck -x -e SC2034,SC1091 scripts/*.sh
fi
# One build for the lints and the tests. Clippy wraps rustc for the workspace's own crates
# (as `cargo clippy` does, through the same two variables) and fails the build on any
# warning, so the dependencies are compiled once, for the tests, instead of being checked
# for clippy first and built again. The benches are linted by building them (nextest does
# not build them).
RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
export RUSTC_WORKSPACE_WRAPPER
if [ ! -x "$RUSTC_WORKSPACE_WRAPPER" ]; then
    echo "clippy is missing: \`rustup component add clippy\`, then run this again" >&2
    exit 1
fi
export CLIPPY_ARGS="-Dwarnings"
# The dependencies nothing runs hard are built without optimisation, here and for Windows
# below (scripts/test_profile.py says which and why): every cargo command of a build gets
# its file, or cargo would build them again.
mkdir -p target
python3 scripts/test_profile.py "$(rustc -vV | sed -n 's/^host: //p')" >target/host-profile.toml
host_profile=(--config "$PWD/target/host-profile.toml")
# The installable package, in a debug build the package test installs and opens (a person
# builds the release one: see the README).
cargo build --locked "${host_profile[@]}" -p roundtable-cli
on_macos || (cd src-tauri && PATH="$PWD/../ui/node_modules/.bin:$PATH" tauri build --debug --bundles deb --ci \
    --config '{"bundle":{"linux":{"deb":{"files":{"/usr/bin/roundtable":"../target/debug/roundtable"}}}}}' \
    -- "${host_profile[@]}")
if command -v cargo-nextest >/dev/null; then
    cargo nextest run --workspace --locked "${host_profile[@]}" --profile ci
    # The hub's integration suite again, each hub keeping its data in PostgreSQL; then each
    # hub being three processes sharing a database, the tests' clients spread over them.
    # Two tests look at one process alone there: its memory gauges (a process's memory
    # catches up on the others' changes at its next write) and max_devices (a bound per
    # process in a cluster, docs/scaleout.md). Selected from the whole workspace's build,
    # as above: `-p roundtable-hub` would resolve the workspace crates' features anew and
    # build them again.
    # The engine's own tests go on PostgreSQL too: their fixture opens the store that
    # variable names.
    hub_suite='binary_id(roundtable-hub::it) & not test(/^cluster::/)'
    ROUNDTABLE_TEST_HUB_STORE=postgres cargo nextest run --workspace --locked "${host_profile[@]}" \
        --profile ci -E "($hub_suite) | (binary_id(roundtable-hub) & test(/^engine::/))"
    ROUNDTABLE_TEST_HUB_STORE=cluster cargo nextest run --workspace --locked "${host_profile[@]}" \
        --profile ci -E "$hub_suite"' & not (test(=memory::what_is_decided_leaves_the_writers_memory_and_stays_out_after_a_restart) | test(=bounds::a_principal_past_max_devices_gets_busy_and_1013))'
else
    cargo test --workspace --locked "${host_profile[@]}"
    ROUNDTABLE_TEST_HUB_STORE=postgres cargo test -p roundtable-hub --test it --locked "${host_profile[@]}"
    ROUNDTABLE_TEST_HUB_STORE=postgres cargo test -p roundtable-hub --lib --locked "${host_profile[@]}" -- engine::
    ROUNDTABLE_TEST_HUB_STORE=cluster cargo test -p roundtable-hub --test it --locked "${host_profile[@]}" -- \
        --skip cluster:: --skip memory::what_is_decided --skip bounds::a_principal_past_max_devices
fi
cargo build --workspace --benches --locked "${host_profile[@]}" --features roundtable-desktop/bench-peer
phase "the workspace's tests, the hub's on PostgreSQL and on a cluster, the benches built"
if on_macos; then
    echo "all tests passed (those that run on macOS: see above)"
    exit 0
fi
# Windows (docs/platforms.md): one build of the whole workspace, every target, linted as it
# compiles (clippy-driver wraps rustc for the workspace's crates, as above): the tests'
# executables (listed for the Wine run below), the CLI and the app. Warnings are errors.
# The dependencies nothing runs hard are not optimised (above).
python3 scripts/test_profile.py x86_64-pc-windows-gnu >target/windows-profile.toml
cargo build --locked --target x86_64-pc-windows-gnu --workspace --all-targets \
    --config target/windows-profile.toml \
    --message-format=json-render-diagnostics >target/windows-artifacts.json
phase "Windows: the workspace built and linted"
# macOS: the whole workspace checked and linted (there is no Apple SDK here to link with),
# warnings as errors. It runs beside the Wine tests and the installer's check below, which
# leave a core idle (they wait on Wine's processes) and need no cargo, at the lowest CPU and
# I/O priority; its output is shown when it is waited for, at the end. (Beside the Linux
# tests it was tried too: it slowed them by about as much as it saved.)
nice -n 19 ionice -c 3 cargo-zigbuild clippy --locked --target aarch64-apple-darwin \
    --workspace --all-targets -- -D warnings >target/macos-check.log 2>&1 &
macos_check=$!
trap 'kill "$macos_check" 2>/dev/null || true; stop_test_postgres' EXIT
# The Windows tests of the platform layer, the protocol, the hub, the core and the CLI (its
# own, and its end-to-end journeys in `tests/e2e/cli.rs`), run under Wine from that build.
# Skipped there, each for its reason:
# - PostgreSQL (every test named `postgres…`) and the hub clusters on it (`cluster::`,
#   `cluster_crash::`): the tests' server is a Linux one on a Unix socket, which a Windows
#   program cannot reach;
# - `independent::`: its client is the tests' Linux Python, not a Windows program.
env INSTA_WORKSPACE_ROOT="$WINDOWS_WORKSPACE" python3 scripts/windows/run_tests.py \
    --artifacts target/windows-artifacts.json \
    roundtable-platform,roundtable-protocol,roundtable-engine,roundtable-hub,roundtable-core,roundtable-cli,roundtable-e2e:cli:: -- \
    --skip postgres --skip cluster:: --skip cluster_crash:: --skip independent::
phase "Windows: the tests under Wine"
# The app's Windows executable and the CLI from that build (debug, as the Linux package's
# above), made into an installer with Debian's makensis (Tauri's own NSIS bundler downloads
# a plugin, which CI cannot), and the installer installed, run and uninstalled under Wine.
windows_build=target/x86_64-pc-windows-gnu/debug
stage=target/windows-installer/stage
rm -rf "$stage"
mkdir -p "$stage"
for program in roundtable-desktop.exe roundtable.exe; do
    x86_64-w64-mingw32-strip -o "$stage/$program" "$windows_build/$program"
done
cp "$windows_build/WebView2Loader.dll" "$stage/"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
installer="$PWD/target/windows-installer/Roundtable_${version}_x64-setup.exe"
makensis -V2 -DVERSION="$version" -DBUILD="$PWD/$stage" -DOUTFILE="$installer" -DCOMPRESSOR=zlib \
    scripts/windows/installer.nsi
scripts/windows/check-installer.sh "$installer" "$version"
phase "Windows: the installer made and checked"
macos_status=0
wait "$macos_check" || macos_status=$?
cat target/macos-check.log >&2
if [ "$macos_status" -ne 0 ]; then
    echo "the macOS check failed (exit $macos_status): its output is above" >&2
    exit "$macos_status"
fi
phase "macOS: the workspace checked and linted (beside the Wine tests)"
echo "all tests passed"
