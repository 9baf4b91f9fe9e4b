//! Which of a crate's top-level modules import which, read from its sources: for the tests
//! that keep a crate's modules in layers and out of import circles (the hub's `layers.rs`,
//! the core's `imports` test). Standard library only, so a crate's own unit tests can
//! include this file (`#[path]`) without depending on the test kit.
//!
//! What counts is code: `crate::module` paths outside comments and outside test modules (a
//! trailing `#[cfg(test)] mod tests`, files named `tests.rs`, and the files a caller
//! names).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The code of a source file: comments, and a trailing `#[cfg(test)] mod tests`, cut.
pub fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut code = String::with_capacity(text.len());
    for line in text.lines() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The `crate::…` modules a piece of code names, grouped imports included.
pub fn named_modules(code: &str, modules: &BTreeSet<&str>) -> BTreeSet<String> {
    let name_at = |text: &str| -> String {
        text.trim()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut named = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let names: Vec<String> = match rest.strip_prefix('{') {
            Some(group) => {
                let end = group.find('}').unwrap_or(group.len());
                group[..end].split(',').map(name_at).collect()
            }
            None => vec![name_at(rest)],
        };
        named.extend(
            names
                .into_iter()
                .filter(|name| modules.contains(name.as_str())),
        );
    }
    named
}

fn sources(path: &Path, skip: &[&str], into: &mut Vec<String>) {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        entries.sort();
        for entry in entries {
            sources(&entry, skip, into);
        }
    } else if path.extension().is_some_and(|ext| ext == "rs") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name != "tests.rs" && !skip.contains(&name.as_str()) {
            into.push(code(&std::fs::read_to_string(path).unwrap()));
        }
    }
}

/// Each top-level module of the crate whose sources are in `src` (the crate root, `lib.rs`,
/// left out) and the other modules its code imports; files named in `skip` are test code.
pub fn imports(src: &Path, skip: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name != "lib" && (path.is_dir() || path.extension().is_some_and(|ext| ext == "rs")) {
            names.insert(name);
        }
    }
    let modules: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let mut graph = BTreeMap::new();
    for module in &names {
        let mut files = Vec::new();
        for path in [src.join(module), src.join(format!("{module}.rs"))] {
            if path.exists() {
                sources(&path, skip, &mut files);
            }
        }
        let mut named = BTreeSet::new();
        for code in &files {
            named.extend(named_modules(code, &modules));
        }
        named.remove(module);
        graph.insert(module.clone(), named);
    }
    graph
}

/// The modules that are in an import circle with another, each circle (a strongly
/// connected set of two or more modules) sorted, the circles in order of their first module.
pub fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reaches = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut next: Vec<&str> = vec![from];
        while let Some(module) = next.pop() {
            for target in graph.get(module).into_iter().flatten() {
                if seen.insert(target.clone()) {
                    next.push(target);
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&str, BTreeSet<String>> = graph
        .keys()
        .map(|module| (module.as_str(), reaches(module)))
        .collect();
    let mut placed = BTreeSet::new();
    let mut found = Vec::new();
    for module in graph.keys() {
        if placed.contains(module) || !reach[module.as_str()].contains(module) {
            continue;
        }
        let circle: Vec<String> = graph
            .keys()
            .filter(|other| {
                reach[module.as_str()].contains(*other) && reach[other.as_str()].contains(module)
            })
            .cloned()
            .collect();
        placed.extend(circle.iter().cloned());
        found.push(circle);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upward import and a circle written into code are found, the same in a comment or
    /// a test module is not.
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

    #[test]
    fn circles_are_the_modules_that_reach_each_other() {
        let graph: BTreeMap<String, BTreeSet<String>> = [
            ("a", vec!["b"]),
            ("b", vec!["c"]),
            ("c", vec!["a", "d"]),
            ("d", vec![]),
            ("e", vec!["f"]),
            ("f", vec!["e"]),
        ]
        .into_iter()
        .map(|(module, targets)| {
            (
                module.to_owned(),
                targets.into_iter().map(str::to_owned).collect(),
            )
        })
        .collect();
        assert_eq!(circles(&graph), [vec!["a", "b", "c"], vec!["e", "f"]]);
    }
}
