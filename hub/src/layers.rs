//! The hub's layers, bottom to top, and the test that keeps them.
//!
//! Why: a module that imports one above it ties the two together, and a circle of such
//! imports is one module in all but name (the hub once had 22 of its 31 modules in one).
//! Each module here may import only from its own layer or a lower one, and the modules of
//! one layer import each other without a circle. A new module gets a place in [`LAYERS`]
//! or the test fails.
//!
//! Below every layer is the engine, a crate of its own (`roundtable-engine`): the command
//! logic, the records, ids, the state, the audit chain, visibility, the retry keys and the
//! SSRF guard's pure checks. The compiler keeps it from importing the hub; the test here
//! keeps it from depending on anything that does I/O ([`ENGINE_DEPENDENCIES`]).
//!
//! What counts is code: `crate::module` paths outside comments and outside test modules
//! (`#[cfg(test)] mod tests`, `tests.rs`, the store's `conformance.rs`). The crate root
//! (`lib.rs`: [`crate::Hub`]) is above every layer; the test does not see imports of its
//! own items, of which two are still taken from below: `unix_ms` (the wall clock, from
//! many modules) and `HubError` (from `tls`).

/// Bottom to top.
pub const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves: counters, settings, pure checks",
        &[
            "metrics",
            "relay",
            "browsers",
            "config",
            "operator",
            "bus",
            "threads",
            "admission",
            "clock",
        ],
    ),
    ("the store", &["store", "test_faults"]),
    (
        "the reads over the store, and the engine's tests on it",
        &["reads", "engine"],
    ),
    (
        "the write pipeline",
        &["delivery", "dispatch", "durability", "cluster", "writer"],
    ),
    ("the hub's context", &["context"]),
    (
        "the edges",
        &[
            "listener",
            "websocket",
            "tls",
            "http_reply",
            "outbound_lookup",
            "session",
            "gateway",
            "bearer",
            "a2a",
            "mcp",
            "http",
            "operator_socket",
        ],
    ),
    ("what runs a hub", &["embedded", "admin", "layers"]),
];

/// Everything the engine may depend on: none does I/O (no async runtime, HTTP client,
/// database driver, nor `workspace-hack`, which would bring them all in). A new dependency
/// that does none either is added here, with thought.
pub const ENGINE_DEPENDENCIES: &[&str] = &[
    "roundtable-protocol",
    "base64",
    "rand",
    "rustc-hash",
    "serde",
    "serde_json",
    "sha2",
    "tracing",
    "url",
];

/// The reading of the sources (shared with the core's test of its imports).
#[cfg(test)]
#[path = "../../testkit/src/module_imports.rs"]
mod module_imports;

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    use super::LAYERS;
    use super::module_imports;

    /// Each top-level module and the modules its code imports.
    fn imports() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        module_imports::imports(&src, &["conformance.rs"])
    }

    fn layer_of() -> BTreeMap<&'static str, usize> {
        let mut layer_of = BTreeMap::new();
        for (layer, (_, modules)) in LAYERS.iter().enumerate() {
            for module in *modules {
                assert!(
                    layer_of.insert(*module, layer).is_none(),
                    "{module} is in two layers"
                );
            }
        }
        layer_of
    }

    #[test]
    fn every_module_has_a_layer_and_imports_only_its_own_or_lower_ones() {
        let graph = imports();
        let layer_of = layer_of();
        let mut wrong = Vec::new();
        for (module, named) in &graph {
            let Some(&layer) = layer_of.get(module.as_str()) else {
                wrong.push(format!("{module} has no place in LAYERS"));
                continue;
            };
            for target in named {
                let target_layer = layer_of.get(target.as_str()).copied().unwrap_or(usize::MAX);
                if target_layer > layer {
                    wrong.push(format!(
                        "{module} ({}) imports {target} ({}), a layer above",
                        LAYERS[layer].0,
                        LAYERS
                            .get(target_layer)
                            .map_or("no layer", |(name, _)| name)
                    ));
                }
            }
        }
        for module in layer_of.keys() {
            if !graph.contains_key(*module) {
                wrong.push(format!("LAYERS names {module}, which is no module"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn the_modules_of_a_layer_import_each_other_without_a_circle() {
        let circles = module_imports::circles(&imports());
        assert!(circles.is_empty(), "import circles: {circles:?}");
    }

    /// The dependencies of every kind `Cargo.toml` gives the engine (normal, dev, build, per
    /// target): the names of the entries of its dependency tables.
    fn engine_dependencies() -> Vec<String> {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/Cargo.toml");
        let text = std::fs::read_to_string(&manifest).expect("engine/Cargo.toml");
        let mut in_dependencies = false;
        let mut names = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_dependencies = line.trim_matches(['[', ']']).ends_with("dependencies");
            } else if in_dependencies && !line.is_empty() && !line.starts_with('#') {
                let name = line.split(['=', '.']).next().unwrap_or_default().trim();
                names.push(name.trim_matches('"').to_owned());
            }
        }
        names
    }

    #[test]
    fn the_engine_depends_on_nothing_that_does_io() {
        let names = engine_dependencies();
        assert!(
            names.iter().any(|name| name == "roundtable-protocol"),
            "engine/Cargo.toml was not read: {names:?}"
        );
        let unknown: Vec<&String> = names
            .iter()
            .filter(|name| !super::ENGINE_DEPENDENCIES.contains(&name.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "the engine does no I/O, but depends on {unknown:?}: if none of them does I/O \
             either, add it to ENGINE_DEPENDENCIES in hub/src/layers.rs"
        );
    }
}
