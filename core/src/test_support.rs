//! What the core's tests share: fixtures as text, the window's fixtures kept equal to what
//! the core decides, the public agent logs, and the test of the core's imports.

use crate::{CoreError, ErrorReport};

/// A value of a closed set from its wire name (`"in_progress"`), for tests that write
/// fixtures as text.
pub(crate) fn wire<T: serde::de::DeserializeOwned>(name: &str) -> T {
    serde_json::from_value(serde_json::Value::String(name.to_owned()))
        .unwrap_or_else(|error| panic!("{name:?} is not a wire name: {error}"))
}

/// Keeps `ui/src/backend/fixtures/FILE` equal to `value`: the window's in-memory backend
/// (`ui/src/backend/fake.ts`) reads there what the core decides, instead of deciding it again
/// in TypeScript. Fails when the file differs, saying how to write it anew
/// (`UPDATE_UI_FIXTURES=1` and the test's `filter`), which writes it instead.
pub(crate) fn keep_ui_fixture(file: &str, value: &serde_json::Value, filter: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ui/src/backend/fixtures")
        .join(file);
    let text = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("UPDATE_UI_FIXTURES").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == text,
        "{} is not what the core decides: run `UPDATE_UI_FIXTURES=1 cargo test -p roundtable-core {filter}` and commit it",
        path.display()
    );
}

/// What a check decided, as the window's fixtures hold it: `{"ok": VALUE}`, or `{"error":
/// {"code", "message"}}` as the error would cross IPC.
pub(crate) fn ui_outcome<T: serde::Serialize>(result: Result<T, CoreError>) -> serde_json::Value {
    match result {
        Ok(value) => serde_json::json!({ "ok": value }),
        Err(error) => serde_json::json!({ "error": ErrorReport::from(&error) }),
    }
}

/// The public agent logs tests run over (`../shared/fixtures/agent-logs` beside the
/// checkout, or `ROUNDTABLE_AGENT_LOGS`), the folder `sub` of them. Missing, a test over them
/// fails saying what to do, unless `ROUNDTABLE_SKIP_SHARED_LOGS=1` says to skip it (`None`):
/// a golden test that passes without its goldens would pass on any parser.
pub(crate) fn shared_agent_logs(sub: &str) -> Option<std::path::PathBuf> {
    let root = std::env::var_os("ROUNDTABLE_AGENT_LOGS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/fixtures/agent-logs")
        });
    let path = root.join(sub);
    if path.is_dir() {
        return Some(path);
    }
    if std::env::var_os("ROUNDTABLE_SKIP_SHARED_LOGS").is_some_and(|value| value == "1") {
        eprintln!(
            "skipping: the shared agent logs are not at {}",
            path.display()
        );
        return None;
    }
    panic!(
        "the shared agent logs are not at {}: put them there (or name their folder with \
         ROUNDTABLE_AGENT_LOGS), or set ROUNDTABLE_SKIP_SHARED_LOGS=1 to skip the tests over them",
        path.display()
    );
}

/// The reading of the sources, shared with the hub's layers test (`hub/src/layers.rs`).
#[path = "../../testkit/src/module_imports.rs"]
mod module_imports;

/// The core's modules and their imports. Why: two modules that import each other are one
/// module in all but name, and the core had two such pairs (the cache and the work it
/// reads, onboarding and the hooks it installs). No two modules import each other now; a
/// longer circle remains (13 modules, through the client, the budgets and the agent
/// runner; 15 before the hooks and the session claims left it), written down here so that it
/// can only shrink.
mod imports {
    use std::path::Path;

    use super::module_imports;

    /// The one circle left, to break as the core is layered like the hub.
    const STILL_IN_A_CIRCLE: &[&str] = &[
        "acp",
        "agent_session",
        "agent_work",
        "agents",
        "budgets",
        "cache",
        "client",
        "local_agents",
        "room_text",
        "runner",
        "screens",
        "wait_for",
        "work",
    ];

    fn imports() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
        module_imports::imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &[])
    }

    #[test]
    fn no_two_modules_import_each_other() {
        let graph = imports();
        let mut pairs = Vec::new();
        for (module, named) in &graph {
            for target in named {
                if module < target && graph[target].contains(module) {
                    pairs.push(format!("{module} <-> {target}"));
                }
            }
        }
        assert!(pairs.is_empty(), "modules importing each other: {pairs:?}");
    }

    #[test]
    fn no_circle_grows_and_none_is_new() {
        let circles = module_imports::circles(&imports());
        let mut left: Vec<&str> = circles.iter().flatten().map(String::as_str).collect();
        left.sort_unstable();
        assert_eq!(
            left, STILL_IN_A_CIRCLE,
            "the modules in import circles changed ({circles:?}): a module that left one \
             leaves STILL_IN_A_CIRCLE too; one that joined one must not"
        );
    }

    #[test]
    fn the_leaves_import_no_module_above_them() {
        let graph = imports();
        for (leaf, allowed) in [
            ("log_events", &[][..]),
            ("hook_settings", &["profile"][..]),
            ("projection", &[][..]),
        ] {
            let named: Vec<&str> = graph[leaf].iter().map(String::as_str).collect();
            assert!(
                named.iter().all(|module| allowed.contains(module)),
                "{leaf} imports {named:?}"
            );
        }
    }
}
