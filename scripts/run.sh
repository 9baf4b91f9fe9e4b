#!/usr/bin/env bash
# Runs Roundtable. Until the desktop app lands, that is the hub with its embedded SQLite
# store, on ws://127.0.0.1:7300 with its data in ~/.local/share/roundtable/hub. Extra
# arguments go to `roundtable hub` (see `--help`). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_packages build-essential pkg-config ca-certificates
ensure_rust

cargo build --release --locked -p roundtable-cli
exec ./target/release/roundtable hub "$@"
