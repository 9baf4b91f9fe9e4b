//! A repository's architecture when nobody wrote one down: its components are the packages
//! its own manifests declare, and their dependencies are the manifests' dependencies on one
//! another. Cargo workspace members (path dependencies, `workspace = true` ones included),
//! npm, pnpm and yarn workspaces, `go.work` modules, Python packages (`pyproject.toml`, a uv
//! workspace's members); a repository with none of these gets its top-level source folders.
//! A polyglot repository gets the packages of every ecosystem it has.
//!
//! Pure over a [`Tree`] (a test gives it a map, the watcher the disk): it reads the manifests
//! and lists the directories their workspace globs name, never the whole repository, so a
//! large repository costs what its manifests cost.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use globset::Glob;
use roundtable_protocol::bodies::ComponentDef;
use serde_json::Value as Json;

/// What inference may look at in a repository, by paths relative to its root.
pub trait Tree {
    /// A file's text, if it is there and readable.
    fn read(&self, path: &Path) -> Option<String>;
    /// The names of the directories directly in `path`.
    fn dirs(&self, path: &Path) -> Vec<String>;
}

/// The repository on disk at `root`.
pub struct Disk<'a>(pub &'a Path);

impl Tree for Disk<'_> {
    fn read(&self, path: &Path) -> Option<String> {
        // Manifests are small; a huge file of that name is not one.
        let full = self.0.join(path);
        let metadata = std::fs::metadata(&full).ok()?;
        (metadata.is_file() && metadata.len() <= 1 << 20)
            .then(|| std::fs::read_to_string(full).ok())
            .flatten()
    }

    fn dirs(&self, path: &Path) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.0.join(path)) else {
            return Vec::new();
        };
        let mut dirs: Vec<String> = entries
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
            .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
            .collect();
        dirs.sort();
        dirs
    }
}

/// The components inferred, where they came from, and every path looked at (to infer again
/// when one changes: a manifest edited, a member's folder added).
#[derive(Debug, Clone, PartialEq)]
pub struct Inference {
    pub components: Vec<ComponentDef>,
    /// In words: `Cargo workspace, npm package` or `top-level folders`.
    pub source: String,
    /// The files read or looked for, and the directories listed, relative to the root.
    pub manifests: Vec<PathBuf>,
}

/// Directories never taken for a component: tools' output, dependencies, caches.
const NOT_SOURCE: &[&str] = &[
    "node_modules",
    "target",
    "dist",
    "build",
    "out",
    "vendor",
    "venv",
    "__pycache__",
    "coverage",
];

/// One package found in a manifest: its directory (relative, `""` for the root), its name,
/// and the names or directories it depends on.
#[derive(Debug)]
struct Package {
    /// Which manifests named it: a dependency by name is on a package of the same kind.
    ecosystem: &'static str,
    dir: String,
    name: String,
    /// Dependencies by directory (Cargo's path dependencies) or by name (the rest).
    on_dirs: Vec<String>,
    on_names: Vec<String>,
}

/// Infers the architecture of the repository `tree` holds; `None` when it has no package and
/// (or, without `folders_allowed`, instead of) no source folder. A home directory kept in git
/// is not one to describe by its folders.
pub fn infer(tree: &impl Tree, folders_allowed: bool) -> Option<Inference> {
    let watched = Watched {
        tree,
        looked: RefCell::new(BTreeSet::new()),
    };
    let tree = &watched;
    let mut sources = Vec::new();
    let mut packages = Vec::new();
    for (source, found) in [
        ("Cargo workspace", cargo(tree)),
        ("npm packages", npm(tree)),
        ("Go modules", go(tree)),
        ("Python packages", python(tree)),
    ] {
        if !found.is_empty() {
            sources.push(source);
            packages.extend(found.into_iter().map(|package| Package {
                ecosystem: source,
                ..package
            }));
        }
    }
    let found = packages.len();
    let components = components(packages);
    if !components.is_empty() && fits(&components) {
        return Some(Inference {
            components,
            source: sources.join(", "),
            manifests: watched.looked.into_inner().into_iter().collect(),
        });
    }
    let folders = if folders_allowed {
        folders(tree)
    } else {
        Vec::new()
    };
    if folders.is_empty() || !fits(&folders) {
        return None;
    }
    let source = if found == 0 {
        "top-level folders".to_owned()
    } else {
        format!("top-level folders (its {found} packages are more than one board holds)")
    };
    Some(Inference {
        components: folders,
        source,
        manifests: watched.looked.into_inner().into_iter().collect(),
    })
}

/// A tree that remembers every path looked at: the files read or looked for (found or not)
/// and the directories listed. A change to any of them may change the inference.
struct Watched<'a, T: Tree> {
    tree: &'a T,
    looked: RefCell<BTreeSet<PathBuf>>,
}

impl<T: Tree> Tree for Watched<'_, T> {
    fn read(&self, path: &Path) -> Option<String> {
        self.looked.borrow_mut().insert(path.to_path_buf());
        self.tree.read(path)
    }

    fn dirs(&self, path: &Path) -> Vec<String> {
        self.looked.borrow_mut().insert(path.to_path_buf());
        self.tree.dirs(path)
    }
}

/// Whether a definition of `components` fits in one event, with room to spare: a board is
/// published as one `arch` event.
fn fits(components: &[ComponentDef]) -> bool {
    const ROOM: usize = roundtable_protocol::limits::EVENT_BODY * 3 / 4;
    serde_json::to_vec(components).is_ok_and(|json| json.len() <= ROOM)
}

/// The packages as components: ids unique (a repeated name gets its directory), each
/// dependency on another package of the repository named once.
fn components(mut packages: Vec<Package>) -> Vec<ComponentDef> {
    packages.sort_by(|a, b| a.dir.cmp(&b.dir));
    packages.dedup_by(|a, b| a.dir == b.dir);
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for package in &packages {
        *taken.entry(package.name.clone()).or_default() += 1;
    }
    let mut given: BTreeSet<String> = BTreeSet::new();
    let ids: Vec<String> = packages
        .iter()
        .map(|package| {
            let id = if taken[&package.name] > 1 && !package.dir.is_empty() {
                format!("{} ({})", package.name, package.dir)
            } else {
                package.name.clone()
            };
            // At most 64 characters, and unique once cut.
            let mut id: String = id.chars().take(64).collect();
            let mut n = 2;
            while given.contains(&id) {
                let suffix = format!(" #{n}");
                id = id.chars().take(64 - suffix.len()).collect::<String>() + &suffix;
                n += 1;
            }
            given.insert(id.clone());
            id
        })
        .collect();
    let by_dir: BTreeMap<&str, &str> = packages
        .iter()
        .zip(&ids)
        .map(|(package, id)| (package.dir.as_str(), id.as_str()))
        .collect();
    let by_name: BTreeMap<(&str, &str), &str> = packages
        .iter()
        .zip(&ids)
        .map(|(package, id)| ((package.ecosystem, package.name.as_str()), id.as_str()))
        .collect();
    packages
        .iter()
        .zip(&ids)
        .map(|(package, id)| {
            let depends_on: BTreeSet<String> = package
                .on_dirs
                .iter()
                .filter_map(|dir| by_dir.get(dir.as_str()))
                .chain(
                    package
                        .on_names
                        .iter()
                        .filter_map(|name| by_name.get(&(package.ecosystem, name.as_str()))),
                )
                .filter(|other| **other != id.as_str())
                .map(|other| (*other).to_owned())
                .collect();
            ComponentDef {
                id: id.clone(),
                name: package.name.chars().take(128).collect(),
                description: None,
                paths: vec![if package.dir.is_empty() {
                    "**".to_owned()
                } else {
                    format!("{}/**", package.dir)
                }],
                depends_on: depends_on.into_iter().collect(),
            }
        })
        .collect()
}

/// The directories a workspace's member patterns name (`crates/*`, `packages/**`, `app`),
/// relative to the root; `!pattern`s and `exclude` leave some out.
fn expand(tree: &impl Tree, patterns: &[String], exclude: &[String]) -> Vec<String> {
    let mut dirs = BTreeSet::new();
    let excluded = |dir: &str| {
        exclude.iter().any(|pattern| {
            Glob::new(clean(pattern)).is_ok_and(|glob| glob.compile_matcher().is_match(dir))
        })
    };
    let patterns: BTreeSet<&String> = patterns.iter().collect();
    for pattern in &patterns {
        let pattern = clean(pattern);
        if pattern.starts_with('!') || pattern.starts_with('/') {
            continue;
        }
        if !pattern.contains(['*', '?', '[', '{']) {
            // A member named as it is: normalized, and never outside the repository.
            dirs.extend(join("", pattern));
            continue;
        }
        if pattern.split('/').any(|part| part == "..") {
            continue;
        }
        let Ok(glob) = Glob::new(pattern) else {
            continue;
        };
        let matcher = glob.compile_matcher();
        // Walk only as deep as the pattern has segments (`**` stops at three levels).
        let depth = if pattern.contains("**") {
            3
        } else {
            pattern.split('/').count().min(4)
        };
        let mut level = vec![String::new()];
        for _ in 0..depth {
            let mut next = Vec::new();
            for dir in &level {
                for child in tree.dirs(Path::new(dir)) {
                    if child.starts_with('.') || NOT_SOURCE.contains(&child.as_str()) {
                        continue;
                    }
                    let path = if dir.is_empty() {
                        child
                    } else {
                        format!("{dir}/{child}")
                    };
                    if matcher.is_match(&path) {
                        dirs.insert(path.clone());
                    }
                    next.push(path);
                }
            }
            level = next;
        }
    }
    let negated: Vec<String> = patterns
        .into_iter()
        .filter_map(|pattern| clean(pattern).strip_prefix('!').map(str::to_owned))
        .chain(exclude.iter().cloned())
        .collect();
    dirs.into_iter()
        .filter(|dir| {
            !excluded(dir)
                && !negated.iter().any(|pattern| {
                    Glob::new(clean(pattern)).is_ok_and(|glob| glob.compile_matcher().is_match(dir))
                })
        })
        .collect()
}

/// A relative path as manifests write it, without `./` or a trailing `/`.
fn clean(path: &str) -> &str {
    path.trim().trim_start_matches("./").trim_end_matches('/')
}

/// `dir/relative`, normalized (`a/b/../c` is `a/c`); `None` when it leaves the repository.
fn join(dir: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|part| !part.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

fn read_toml(tree: &impl Tree, path: &str) -> Option<toml::Table> {
    let text = tree.read(Path::new(path))?;
    toml::from_str(&text).ok()
}

fn strings(value: Option<&toml::Value>) -> Vec<String> {
    value
        .and_then(toml::Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn manifest_path(dir: &str, file: &str) -> String {
    if dir.is_empty() {
        file.to_owned()
    } else {
        format!("{dir}/{file}")
    }
}

/// Cargo: the workspace's members (or the root package alone), with their path
/// dependencies, `workspace = true` ones through `[workspace.dependencies]`.
fn cargo(tree: &impl Tree) -> Vec<Package> {
    let Some(root) = read_toml(tree, "Cargo.toml") else {
        return Vec::new();
    };
    let workspace = root.get("workspace").and_then(toml::Value::as_table);
    let shared: BTreeMap<String, String> = workspace
        .and_then(|workspace| workspace.get("dependencies"))
        .and_then(toml::Value::as_table)
        .map(|deps| {
            deps.iter()
                .filter_map(|(name, spec)| {
                    let path = spec.get("path")?.as_str()?;
                    Some((name.clone(), join("", path)?))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut dirs = match workspace {
        Some(workspace) => expand(
            tree,
            &strings(workspace.get("members")),
            &strings(workspace.get("exclude")),
        ),
        None => Vec::new(),
    };
    if root.contains_key("package") {
        dirs.push(String::new());
    }
    let mut packages = Vec::new();
    for dir in dirs {
        let manifest = if dir.is_empty() {
            root.clone()
        } else {
            let Some(manifest) = read_toml(tree, &manifest_path(&dir, "Cargo.toml")) else {
                continue;
            };
            manifest
        };
        let Some(name) = manifest
            .get("package")
            .and_then(|package| package.get("name"))
            .and_then(toml::Value::as_str)
        else {
            continue;
        };
        let mut on_dirs = Vec::new();
        for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = manifest.get(table).and_then(toml::Value::as_table) else {
                continue;
            };
            for (dep, spec) in deps {
                if let Some(path) = spec.get("path").and_then(toml::Value::as_str) {
                    on_dirs.extend(join(&dir, path));
                } else if spec.get("workspace").and_then(toml::Value::as_bool) == Some(true)
                    && let Some(path) = shared.get(dep)
                {
                    on_dirs.push(path.clone());
                }
            }
        }
        packages.push(Package {
            ecosystem: "",
            dir,
            name: name.to_owned(),
            on_dirs,
            on_names: Vec::new(),
        });
    }
    packages
}

fn read_json(tree: &impl Tree, path: &str) -> Option<Json> {
    let text = tree.read(Path::new(path))?;
    serde_json::from_str(&text).ok()
}

/// npm, yarn and pnpm: the workspaces' packages (`workspaces`, `workspaces.packages`,
/// `pnpm-workspace.yaml`); without workspaces, the root's package and those of top-level
/// folders. Dependencies by name, in any of the dependency lists.
fn npm(tree: &impl Tree) -> Vec<Package> {
    let root = read_json(tree, "package.json");
    let mut patterns: Vec<String> = root
        .as_ref()
        .and_then(|root| {
            let workspaces = root.get("workspaces")?;
            workspaces
                .as_array()
                .or_else(|| workspaces.get("packages")?.as_array())
                .cloned()
        })
        .unwrap_or_default()
        .iter()
        .filter_map(|pattern| pattern.as_str().map(str::to_owned))
        .collect();
    if let Some(text) = tree.read(Path::new("pnpm-workspace.yaml")) {
        patterns.extend(pnpm_packages(&text));
    }
    let mut dirs = if patterns.is_empty() {
        source_folders(tree)
            .into_iter()
            .filter(|dir| tree.read(&Path::new(dir).join("package.json")).is_some())
            .collect()
    } else {
        expand(tree, &patterns, &[])
    };
    if root.is_some() {
        dirs.push(String::new());
    }
    let mut packages = Vec::new();
    for dir in dirs {
        let manifest = if dir.is_empty() {
            root.clone()
        } else {
            read_json(tree, &manifest_path(&dir, "package.json"))
        };
        let Some(manifest) = manifest else {
            continue;
        };
        let Some(name) = manifest.get("name").and_then(Json::as_str) else {
            continue;
        };
        let on_names = [
            "dependencies",
            "devDependencies",
            "peerDependencies",
            "optionalDependencies",
        ]
        .iter()
        .filter_map(|list| manifest.get(list)?.as_object())
        .flat_map(|deps| deps.keys().cloned())
        .collect();
        packages.push(Package {
            ecosystem: "",
            dir,
            name: name.to_owned(),
            on_dirs: Vec::new(),
            on_names,
        });
    }
    packages
}

/// The `packages:` list of a `pnpm-workspace.yaml` (the one key inference needs; a YAML
/// parser would be a dependency for four lines).
fn pnpm_packages(text: &str) -> Vec<String> {
    let mut in_packages = false;
    let mut patterns = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if !line.starts_with([' ', '\t', '-']) {
            in_packages = trimmed.starts_with("packages:");
            continue;
        }
        if in_packages && let Some(item) = trimmed.strip_prefix('-') {
            let item = item.split(" #").next().unwrap_or_default().trim();
            patterns.push(item.trim_matches(['\'', '"']).to_owned());
        }
    }
    patterns
}

/// Go: the modules `go.work` uses (or the root's `go.mod`), depending on one another through
/// their `require`s.
fn go(tree: &impl Tree) -> Vec<Package> {
    let dirs: Vec<String> = match tree.read(Path::new("go.work")) {
        Some(text) => go_directives(&text, "use")
            .into_iter()
            .filter_map(|dir| join("", &dir))
            .collect(),
        None => vec![String::new()],
    };
    let mut packages = Vec::new();
    for dir in dirs {
        let path = manifest_path(&dir, "go.mod");
        let Some(text) = tree.read(Path::new(&path)) else {
            continue;
        };
        let Some(module) = go_directives(&text, "module").into_iter().next() else {
            continue;
        };
        let on_names = go_directives(&text, "require")
            .into_iter()
            .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
            .collect();
        packages.push(Package {
            ecosystem: "",
            dir,
            name: module,
            on_dirs: Vec::new(),
            on_names,
        });
    }
    packages
}

/// The arguments of a go.mod or go.work directive, single-line or in a `( … )` block.
fn go_directives(text: &str, directive: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default().trim();
        if in_block {
            if line == ")" {
                in_block = false;
            } else if !line.is_empty() {
                found.push(line.trim_matches('"').to_owned());
            }
            continue;
        }
        let Some(rest) = line.strip_prefix(directive) else {
            continue;
        };
        if !rest.starts_with([' ', '\t', '(']) {
            continue;
        }
        let rest = rest.trim();
        if rest == "(" {
            in_block = true;
        } else if !rest.is_empty() {
            found.push(rest.trim_matches('"').to_owned());
        }
    }
    found
}

/// Python: a uv workspace's members, else the root's and the top-level folders' projects
/// (`pyproject.toml` with a `[project]` name); dependencies by normalized name.
fn python(tree: &impl Tree) -> Vec<Package> {
    let root = read_toml(tree, "pyproject.toml");
    let members = root
        .as_ref()
        .and_then(|root| root.get("tool")?.get("uv")?.get("workspace").cloned());
    let mut dirs = match &members {
        Some(workspace) => expand(
            tree,
            &strings(workspace.get("members")),
            &strings(workspace.get("exclude")),
        ),
        None => source_folders(tree)
            .into_iter()
            .filter(|dir| tree.read(&Path::new(dir).join("pyproject.toml")).is_some())
            .collect(),
    };
    if root.is_some() {
        dirs.push(String::new());
    }
    let normalize = |name: &str| name.trim().to_ascii_lowercase().replace('_', "-");
    let mut packages = Vec::new();
    for dir in dirs {
        let project = if dir.is_empty() {
            root.clone()
        } else {
            read_toml(tree, &manifest_path(&dir, "pyproject.toml"))
        };
        let Some(project) = project.as_ref().and_then(|file| file.get("project")) else {
            continue;
        };
        let Some(name) = project.get("name").and_then(toml::Value::as_str) else {
            continue;
        };
        let on_names = strings(project.get("dependencies"))
            .iter()
            .map(|requirement| {
                let end = requirement
                    .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
                    .unwrap_or(requirement.len());
                normalize(&requirement[..end])
            })
            .collect();
        packages.push(Package {
            ecosystem: "",
            dir,
            name: normalize(name),
            on_dirs: Vec::new(),
            on_names,
        });
    }
    packages
}

/// The top-level folders that may hold source: not hidden, not tools' output.
fn source_folders(tree: &impl Tree) -> Vec<String> {
    tree.dirs(Path::new(""))
        .into_iter()
        .filter(|dir| !dir.starts_with('.') && !NOT_SOURCE.contains(&dir.as_str()))
        .collect()
}

/// The top-level source folders as components.
fn folders(tree: &impl Tree) -> Vec<ComponentDef> {
    source_folders(tree)
        .into_iter()
        .map(|dir| ComponentDef {
            id: dir.chars().take(64).collect(),
            name: dir.clone(),
            description: None,
            paths: vec![format!("{dir}/**")],
            depends_on: Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
