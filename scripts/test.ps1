# Runs Roundtable's tests that run on Windows: formatting, the whole workspace linted with
# warnings as errors, the UI's tests, and the tests of the platform layer, the protocol, the
# hub, the core and the CLI. Installs what it needs first (with winget), and can be run again
# at any time. From a clone of the repository, in PowerShell:  .\scripts\test.ps1
#
# Left to Linux (scripts/test.sh), each for its reason: the desktop app in a WebDriver-driven
# webview (WebKitGTK's driver), the hub on PostgreSQL and its clusters (the tests start a
# PostgreSQL of their own from Debian's packages), the real agent CLIs end to end, and the
# tests that stop a hub with SIGTERM. docs/platforms.md lists what runs where.
$ErrorActionPreference = 'Stop'
Set-Location (Join-Path $PSScriptRoot '..')
. (Join-Path $PSScriptRoot 'windows\common.ps1')

Install-BuildTools
Install-Rust
Install-Node
Install-UiPackages
Push-Location ui
try {
    Invoke-Checked npm run --silent check
    Invoke-Checked npm test --silent
    Invoke-Checked npm run --silent build
} finally { Pop-Location }
Invoke-Checked cargo fmt --all -- --check
Invoke-Checked cargo clippy --locked --workspace --all-targets -- -D warnings
Invoke-Checked cargo test --locked --no-fail-fast `
    -p roundtable-platform -p roundtable-protocol -p roundtable-hub -p roundtable-core -p roundtable-cli -- `
    --skip on_postgres --skip store::postgres:: --skip postgresql --skip postgres:: `
    --skip cluster:: --skip cluster_crash:: --skip crash:: --skip hub_command::prints_its_address `
    --skip operator::a_closed_hub --skip independent::
Write-Host 'all tests passed'
