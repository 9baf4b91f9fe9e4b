//! The hub's layers, bottom to top, and the test that keeps them.
//!
//! Why: a module that imports one above it ties the two together, and a circle of such
//! imports is one module in all but name (the hub once had 22 of its 31 modules in one).
//! Each module here may import only from its own layer or a lower one, and the modules of
//! one layer import each other without a circle. A new module gets a place in [`LAYERS`]
//! or the test fails.
//!
//! What counts is code: `crate::module` paths outside comments and outside test modules
//! (`#[cfg(test)] mod tests`, `tests.rs`, the store's `conformance.rs`). The crate root
//! (`lib.rs`: [`crate::Hub`]) is above every layer; the test does not see imports of its
//! own items, of which two are still taken from below: `unix_ms` (the wall clock, from
//! many modules) and `HubError` (from `tls`).

/// Bottom to top.
pub const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves: ids, counters, settings, the store's records, pure checks",
        &[
            "ids",
            "metrics",
            "relay",
            "browsers",
            "outbound_guard",
            "records",
            "config",
            "operator",
            "sent_keys",
            "bus",
            "threads",
        ],
    ),
    (
        "policies over records",
        &["audit", "visibility", "admission"],
    ),
    ("the store", &["store", "test_faults"]),
    (
        "the state and the decisions",
        &["state", "engine", "replication", "reads"],
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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    use super::LAYERS;

    /// The code of a source file: comments, and a trailing `#[cfg(test)] mod tests`, cut.
    fn code(text: &str) -> String {
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => &text[..at],
            None => text,
        };
        let mut code = String::with_capacity(text.len());
        for line in text.lines() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") {
                continue;
            }
            code.push_str(line);
            code.push('\n');
        }
        code
    }

    /// The `crate::…` modules a piece of code names, grouped imports included.
    fn named_modules(code: &str, modules: &BTreeSet<&str>) -> BTreeSet<String> {
        let mut named = BTreeSet::new();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if modules.contains(name.as_str()) {
                        named.insert(name);
                    }
                }
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if modules.contains(name.as_str()) {
                named.insert(name);
            }
        }
        named
    }

    fn sources(path: &Path, into: &mut Vec<(String, String)>) {
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(path)
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .collect();
            entries.sort();
            for entry in entries {
                sources(&entry, into);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name != "tests.rs" && name != "conformance.rs" {
                let text = std::fs::read_to_string(path).unwrap();
                into.push((path.display().to_string(), code(&text)));
            }
        }
    }

    /// Each top-level module and the modules its code imports.
    fn imports() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut names = BTreeSet::new();
        for entry in std::fs::read_dir(&src).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if name != "lib" {
                names.insert(name);
            }
        }
        let modules: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let mut graph = BTreeMap::new();
        for module in &names {
            let mut files = Vec::new();
            let dir = src.join(module);
            if dir.is_dir() {
                sources(&dir, &mut files);
            }
            let file = src.join(format!("{module}.rs"));
            if file.is_file() {
                sources(&file, &mut files);
            }
            let mut named = BTreeSet::new();
            for (_, code) in &files {
                named.extend(named_modules(code, &modules));
            }
            named.remove(module);
            graph.insert(module.clone(), named);
        }
        graph
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
        let graph = imports();
        // Depth-first, marking the path: reaching a module on it again is a circle.
        fn visit<'a>(
            module: &'a str,
            graph: &'a BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<&'a str>,
            done: &mut BTreeSet<&'a str>,
        ) -> Option<Vec<String>> {
            if let Some(at) = path.iter().position(|on| *on == module) {
                let mut circle: Vec<String> = path[at..].iter().map(|m| (*m).to_owned()).collect();
                circle.push(module.to_owned());
                return Some(circle);
            }
            if !done.insert(module) {
                return None;
            }
            path.push(module);
            for next in graph.get(module).into_iter().flatten() {
                if let Some(circle) = visit(next, graph, path, done) {
                    return Some(circle);
                }
            }
            path.pop();
            None
        }
        let mut done = BTreeSet::new();
        for module in graph.keys() {
            let circle = visit(module, &graph, &mut Vec::new(), &mut done);
            assert!(circle.is_none(), "an import circle: {circle:?}");
        }
    }

    /// The test reads what it should: an upward import and a circle written into code are
    /// found, the same in a comment or a test module is not.
    #[test]
    fn the_reading_finds_imports_in_code_only() {
        let modules: BTreeSet<&str> = ["store", "engine", "records"].into_iter().collect();
        let text = "use crate::{engine::Command, records};\n\
                    // crate::store is only mentioned\n\
                    #[cfg(test)]\nmod tests { use crate::store; }\n";
        let named = named_modules(&code(text), &modules);
        assert_eq!(named.into_iter().collect::<Vec<_>>(), ["engine", "records"]);
        let called = named_modules(&code("fn f() { crate::store::open(); }\n"), &modules);
        assert_eq!(called.into_iter().collect::<Vec<_>>(), ["store"]);
        let commented = named_modules(&code("// use crate::store;\n"), &modules);
        assert!(commented.is_empty());
    }
}
