//! The build `scripts/run.sh` makes (Cargo.toml's `app` profile) stays what it says: cargo
//! only warns about a profile override that names no package, so a dependency renamed or
//! dropped would silently leave the app's hot path unoptimised.

use std::collections::BTreeSet;
use std::path::Path;

fn workspace_file(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn table<'a>(value: &'a toml::Value, path: &[&str]) -> &'a toml::Table {
    path.iter()
        .fold(value, |value, key| {
            value.get(key).unwrap_or_else(|| panic!("no {path:?}"))
        })
        .as_table()
        .unwrap()
}

#[test]
fn the_app_profile_optimises_packages_the_build_has() {
    let manifest: toml::Value = toml::from_str(&workspace_file("Cargo.toml")).unwrap();
    let lock: toml::Value = toml::from_str(&workspace_file("Cargo.lock")).unwrap();
    let locked: BTreeSet<&str> = lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| package["name"].as_str().unwrap())
        .collect();
    let app = table(&manifest, &["profile", "app"]);
    let unoptimised = app["opt-level"].as_integer();
    assert_eq!(unoptimised, Some(0), "{app:?}");
    let optimised = table(&manifest, &["profile", "app", "package"]);
    for (package, settings) in optimised {
        assert!(
            locked.contains(package.as_str()),
            "`{package}` is not in Cargo.lock"
        );
        assert!(
            settings["opt-level"].as_integer() > unoptimised,
            "{package}: {settings:?}"
        );
    }
    for hot in [
        "roundtable-hub",
        "roundtable-engine",
        "roundtable-core",
        "libsqlite3-sys",
        "tokio",
    ] {
        assert!(optimised.contains_key(hot), "{hot} is not optimised");
    }
}

#[test]
fn the_run_scripts_build_the_app_profile() {
    for (script, built) in [
        ("scripts/run.sh", "./target/app/roundtable-desktop"),
        ("scripts/run.ps1", r".\target\app\roundtable-desktop.exe"),
    ] {
        let text = workspace_file(script);
        let builds: Vec<&str> = text
            .lines()
            .filter(|line| line.contains("cargo build"))
            .collect();
        assert!(!builds.is_empty(), "{script} builds nothing");
        for line in builds {
            assert!(line.contains("--profile app"), "{script}: {line}");
        }
        assert!(text.contains(built), "{script} does not run {built}");
    }
}
