//! The installable package: the `.deb` the test command builds (`tauri build --bundles deb`)
//! holds the app, the `roundtable` CLI beside it, a desktop entry that registers the
//! `roundtable://` scheme, and the icons; and the app it installs opens its window.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::{Desk, workspace};
use crate::support::Machine;

/// The package built for this run: `target/debug/bundle/deb/Roundtable_<version>_amd64.deb`,
/// or the one `ROUNDTABLE_TEST_DEB` names.
fn package() -> PathBuf {
    if let Some(path) = std::env::var_os("ROUNDTABLE_TEST_DEB") {
        return PathBuf::from(path);
    }
    let built = workspace().join(format!(
        "target/debug/bundle/deb/Roundtable_{}_amd64.deb",
        env!("CARGO_PKG_VERSION")
    ));
    assert!(
        built.is_file(),
        "no package at {}: ./scripts/test.sh builds it (`tauri build --debug --bundles deb` in \
         src-tauri, see the script), or name one in ROUNDTABLE_TEST_DEB",
        built.display()
    );
    built
}

fn dpkg_deb(args: &[&str], deb: &Path) -> String {
    let output = Command::new("dpkg-deb")
        .args(args)
        .arg(deb)
        .output()
        .expect("dpkg-deb runs (Debian's dpkg)");
    assert!(
        output.status.success(),
        "dpkg-deb {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_package_installs_the_app_the_cli_and_the_link_scheme_and_its_app_opens() {
    let deb = package();
    let fields = dpkg_deb(&["--info"], &deb);
    assert!(fields.contains("Package: roundtable"), "{fields}");
    assert!(
        fields.contains("libwebkit2gtk-4.1"),
        "it depends on WebKitGTK: {fields}"
    );
    let contents = dpkg_deb(&["--contents"], &deb);
    let files: Vec<&str> = contents
        .lines()
        .filter_map(|line| line.split_whitespace().last())
        .collect();
    for wanted in [
        "usr/bin/roundtable-desktop",
        "usr/bin/roundtable",
        "usr/share/applications/Roundtable.desktop",
        "usr/share/icons/hicolor/128x128/apps/roundtable-desktop.png",
    ] {
        assert!(files.contains(&wanted), "{wanted} is missing: {files:?}");
    }
    assert!(
        !files.iter().any(|file| file.ends_with("roundtable-blank")),
        "the benchmarks' blank window is not part of the app: {files:?}"
    );

    // Installed into a root of its own, as `dpkg -i` would lay it out.
    let root = tempfile::tempdir().unwrap();
    let root_arg = root.path().to_str().unwrap();
    let output = Command::new("dpkg-deb")
        .args(["--extract"])
        .arg(&deb)
        .arg(root_arg)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let entry = std::fs::read_to_string(
        root.path()
            .join("usr/share/applications/Roundtable.desktop"),
    )
    .unwrap();
    for line in [
        "Exec=roundtable-desktop",
        "MimeType=x-scheme-handler/roundtable",
        "Icon=roundtable-desktop",
    ] {
        assert!(entry.lines().any(|l| l == line), "{line} in:\n{entry}");
    }
    let cli = Command::new(root.path().join("usr/bin/roundtable"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&cli.stdout).starts_with("roundtable "),
        "{cli:?}"
    );

    // The installed app opens its window (the first screen waits for the person).
    let desk = Desk::launch(
        "package",
        Machine::new(),
        root.path().join("usr/bin/roundtable-desktop"),
    )
    .await;
    desk.go("rooms").await;
    desk.wait("room-create").await;
    desk.screenshot("installed-app").await;
    desk.finish().await;
}
