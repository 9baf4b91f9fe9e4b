# Runs Roundtable on Windows: the desktop app, with a hub of its own on this machine until
# Settings name another. Installs what it needs first (with winget), and can be run again at
# any time. From a clone of the repository, in PowerShell:  .\scripts\run.ps1
#
# Written for Windows 10 and 11 and linted here as far as Linux can (docs/platforms.md says
# what was and was not run).
$ErrorActionPreference = 'Stop'
Set-Location (Join-Path $PSScriptRoot '..')
. (Join-Path $PSScriptRoot 'windows\common.ps1')

Install-BuildTools
Install-Rust
Install-Node
Install-UiPackages
Push-Location ui
try { Invoke-Checked npm run --silent build } finally { Pop-Location }
# The app runs `roundtable.exe` (beside it) for the agents it onboards.
# `--profile app`: built in a third of the time `--release` takes (Cargo.toml says how).
Invoke-Checked cargo build --profile app --locked -p roundtable-cli -p roundtable-desktop
& .\target\app\roundtable-desktop.exe
