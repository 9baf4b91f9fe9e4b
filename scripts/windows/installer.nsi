; Roundtable's Windows installer, for one user (no administrator): the app, the `roundtable`
; command beside it, the WebView2 loader the app's -gnu build needs, a Start-menu entry, the
; id Windows shows the app's notifications under, and an uninstaller.
;
; Made with Debian's makensis, offline (Tauri's own NSIS bundler downloads a plugin):
;   makensis -DVERSION=0.1.0 -DBUILD="$PWD/target/x86_64-pc-windows-gnu/release" \
;            -DOUTFILE="$PWD/Roundtable_0.1.0_x64-setup.exe" scripts/windows/installer.nsi
; (makensis works in this file's folder: give it absolute paths.)
; Roundtable registers its `roundtable://` links itself when it starts.

; A 64-bit installer, as the app is (and as Wine without its 32-bit part runs).
Target amd64-unicode
; What ships is packed hard; the tests' installer (-DCOMPRESSOR=zlib) quickly.
!ifndef COMPRESSOR
  !define COMPRESSOR "/SOLID lzma"
!endif
SetCompressor ${COMPRESSOR}

!ifndef VERSION
  !error "give the version: -DVERSION=…"
!endif
!ifndef BUILD
  !error "give the build's directory: -DBUILD=…"
!endif
!ifndef OUTFILE
  !define OUTFILE "Roundtable_${VERSION}_x64-setup.exe"
!endif

!define ID "dev.roundtable.desktop"
!define UNINSTALL_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\Roundtable"

Name "Roundtable"
OutFile "${OUTFILE}"
Icon "../../icons/icon.ico"
UninstallIcon "../../icons/icon.ico"
InstallDir "$LOCALAPPDATA\Programs\Roundtable"
InstallDirRegKey HKCU "${UNINSTALL_KEY}" "InstallLocation"
RequestExecutionLevel user
VIProductVersion "${VERSION}.0"
VIAddVersionKey "ProductName" "Roundtable"
VIAddVersionKey "FileDescription" "Roundtable: where agents and people meet"
VIAddVersionKey "FileVersion" "${VERSION}"
VIAddVersionKey "ProductVersion" "${VERSION}"
VIAddVersionKey "LegalCopyright" "Roundtable's authors, under the Apache License 2.0"

Page directory
Page instfiles
UninstPage uninstConfirm
UninstPage instfiles

Section "Roundtable"
  SetOutPath "$INSTDIR"
  File "${BUILD}/roundtable-desktop.exe"
  File "${BUILD}/roundtable.exe"
  File "${BUILD}/WebView2Loader.dll"
  WriteUninstaller "$INSTDIR\uninstall.exe"
  CreateShortCut "$SMPROGRAMS\Roundtable.lnk" "$INSTDIR\roundtable-desktop.exe"
  ; The id the app's notifications name it by: Windows shows them under this name and icon.
  WriteRegStr HKCU "Software\Classes\AppUserModelId\${ID}" "DisplayName" "Roundtable"
  WriteRegStr HKCU "Software\Classes\AppUserModelId\${ID}" "IconUri" "$INSTDIR\roundtable-desktop.exe"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayName" "Roundtable"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayIcon" "$INSTDIR\roundtable-desktop.exe"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegStr HKCU "${UNINSTALL_KEY}" "QuietUninstallString" '"$INSTDIR\uninstall.exe" /S'
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoRepair" 1
SectionEnd

; What the installer put there, and nothing else: the person's data (profiles, tokens, the
; hub's database in %LOCALAPPDATA%\roundtable) stays.
Section "Uninstall"
  Delete "$INSTDIR\roundtable-desktop.exe"
  Delete "$INSTDIR\roundtable.exe"
  Delete "$INSTDIR\WebView2Loader.dll"
  Delete "$INSTDIR\uninstall.exe"
  RMDir "$INSTDIR"
  Delete "$SMPROGRAMS\Roundtable.lnk"
  DeleteRegKey HKCU "Software\Classes\AppUserModelId\${ID}"
  DeleteRegKey HKCU "Software\Classes\roundtable"
  DeleteRegKey HKCU "${UNINSTALL_KEY}"
SectionEnd
