#!/usr/bin/env bash
# Checks the Windows installer under Wine as a person would use it: installs it silently for
# this user, checks what it put where (the app, the `roundtable` command, the WebView2
# loader, the Start-menu entry, the notification id, the uninstall entry), runs the installed
# `roundtable --version`, then uninstalls and checks that nothing of it is left.
# Usage: scripts/windows/check-installer.sh INSTALLER VERSION (with WINEPREFIX set).
set -euo pipefail
installer="$1" version="$2"
dir='C:\roundtable-installer-check'
unix_dir="$WINEPREFIX/drive_c/roundtable-installer-check"
uninstall_key='HKCU\Software\Microsoft\Windows\CurrentVersion\Uninstall\Roundtable'
notification_key='HKCU\Software\Classes\AppUserModelId\dev.roundtable.desktop'
fail() { echo "installer check: $*" >&2; exit 1; }
shortcut() { find "$WINEPREFIX/drive_c/users" -path '*Start Menu/Programs/Roundtable.lnk' | grep -q .; }

rm -rf "$unix_dir"
wine "$installer" /S "/D=$dir"
for file in roundtable-desktop.exe roundtable.exe WebView2Loader.dll uninstall.exe; do
    [ -f "$unix_dir/$file" ] || fail "$file is not installed"
done
wine "$unix_dir/roundtable.exe" --version | grep -qx "roundtable $version" ||
    fail "the installed roundtable does not say it is $version"
shortcut || fail "no Start-menu entry"
wine reg query "$uninstall_key" /v DisplayVersion | grep -q "$version" || fail "no uninstall entry"
wine reg query "$notification_key" /v DisplayName | grep -q Roundtable || fail "no notification id"

# In place (`_?=`), so the uninstaller is done when it returns; it keeps only itself.
wine "$unix_dir/uninstall.exe" /S "_?=$dir"
left="$(find "$unix_dir" -mindepth 1 ! -name uninstall.exe)"
[ -z "$left" ] || fail "the uninstaller left $left"
! shortcut || fail "the Start-menu entry is left"
! wine reg query "$uninstall_key" >/dev/null 2>&1 || fail "the uninstall entry is left"
! wine reg query "$notification_key" >/dev/null 2>&1 || fail "the notification id is left"
rm -rf "$unix_dir"
echo "installer check: installed, ran and uninstalled $installer"
