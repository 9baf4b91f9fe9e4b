#!/usr/bin/env bash
# Runs Roundtable: the desktop app, with a hub of its own on this machine until Settings
# name another. On a machine without a display it says so and runs the hub instead
# (arguments go to `roundtable hub`, see `--help`). Installs what it needs first: Debian
# packages on Debian or Ubuntu; on macOS, Homebrew's (after Apple's command line tools).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

if on_macos; then
    ensure_macos_tools
else
    # libdbus: the CLI keeps a person's token in the Secret Service when one runs.
    ensure_packages build-essential pkg-config ca-certificates libdbus-1-dev
fi
ensure_rust

if ! on_macos && [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
    echo "no display here (DISPLAY and WAYLAND_DISPLAY are unset): running the hub instead of the desktop app" >&2
    cargo build --profile app --locked -p roundtable-cli
    exec ./target/app/roundtable hub "$@"
fi

on_macos || ensure_packages "${DESKTOP_PACKAGES[@]}"
ensure_node
ensure_ui_packages
(cd ui && npm run --silent build)
# The app runs `roundtable` (beside it) for the agents it onboards. `--profile app`: built in a
# third of the time `--release` takes (Cargo.toml says how).
cargo build --profile app --locked -p roundtable-cli -p roundtable-desktop
exec ./target/app/roundtable-desktop
