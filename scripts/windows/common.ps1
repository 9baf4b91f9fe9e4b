# Shared by scripts\run.ps1 and scripts\test.ps1: install what is missing, idempotently,
# with winget (Windows 10 1809 and later, Windows 11).

# Runs a program and stops the script when it fails (PowerShell does not, for programs).
function Invoke-Checked {
    $program, $arguments = $args
    & $program @arguments
    if ($LASTEXITCODE -ne 0) {
        throw "$program $($arguments -join ' ') failed (exit code $LASTEXITCODE)"
    }
}

function Test-Command([string] $Name) {
    [bool] (Get-Command $Name -ErrorAction SilentlyContinue)
}

# PATH as the machine and the user have it now (an installer just changed it).
function Update-Path {
    $env:Path = @(
        [Environment]::GetEnvironmentVariable('Path', 'Machine'),
        [Environment]::GetEnvironmentVariable('Path', 'User'),
        (Join-Path $env:USERPROFILE '.cargo\bin')
    ) -join ';'
}

function Install-Package([string] $Id, [string] $What, [string[]] $Extra = @()) {
    if (-not (Test-Command winget)) {
        throw "$What is missing, and so is winget to install it: install 'App Installer' from the Microsoft Store (or $What by hand), then run this again"
    }
    Write-Host "installing $What ($Id)"
    Invoke-Checked winget install --id $Id --exact --silent --accept-package-agreements --accept-source-agreements @Extra
    Update-Path
}

# Microsoft's C++ build tools (Rust's Windows toolchain links with them; SQLite and ring
# compile C) and the WebView2 runtime the app's window is (already part of Windows 11).
function Install-BuildTools {
    $vswhere = Join-Path ${env:ProgramFiles(x86)} 'Microsoft Visual Studio\Installer\vswhere.exe'
    $found = (Test-Path $vswhere) -and
        (& $vswhere -products * -requires Microsoft.VisualStudio.Component.VC.Tools.x86.x64 -property installationPath)
    if (-not $found) {
        Install-Package 'Microsoft.VisualStudio.2022.BuildTools' 'the C++ build tools' @(
            '--override', '--wait --passive --add Microsoft.VisualStudio.Workload.VCTools --includeRecommended')
    }
    $webview = 'HKLM:\SOFTWARE\WOW6432Node\Microsoft\EdgeUpdate\Clients\{F3017226-FE2A-4295-8BDF-00C3A9A7E4C5}'
    if (-not (Test-Path $webview)) {
        Install-Package 'Microsoft.EdgeWebView2Runtime' 'the WebView2 runtime'
    }
}

function Install-Rust {
    Update-Path
    if (-not (Test-Command cargo)) {
        Install-Package 'Rustlang.Rustup' 'Rust (rustup)'
        Invoke-Checked rustup default stable
    }
}

# Node.js 20.19 or newer with npm, for the UI's build (Vite 8) and tests.
function Install-Node {
    $recent = $false
    if (Test-Command node) {
        node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'
        $recent = $LASTEXITCODE -eq 0
    }
    if (-not $recent) {
        Install-Package 'OpenJS.NodeJS.LTS' 'Node.js'
    }
}

# The UI's packages, exactly as locked; again only when the lock file changed.
function Install-UiPackages {
    $installed = 'ui\node_modules\.package-lock.json'
    if (-not (Test-Path $installed) -or
        (Get-Item 'ui\package-lock.json').LastWriteTime -gt (Get-Item $installed).LastWriteTime) {
        Write-Host "installing the UI's packages"
        Push-Location ui
        try { Invoke-Checked npm ci --no-audit --no-fund --silent } finally { Pop-Location }
    }
}
