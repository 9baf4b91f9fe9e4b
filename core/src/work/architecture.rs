//! A repository's architecture, as its team writes it down in
//! `.roundtable/architecture.toml`: components, the files that belong to each (globs
//! relative to the repository), and what each depends on. A file an agent edits marks its
//! component as being worked on by that agent. A repository without the file gets the
//! architecture its manifests imply ([`super::inferred`]), each file in the one package that
//! holds it most closely.
//!
//! ```toml
//! [[components]]
//! id = "parser"
//! name = "Parser"
//! description = "Turns the config text into a tree"
//! paths = ["src/parser/**"]
//! depends_on = ["lexer"]
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use globset::{Glob, GlobSet, GlobSetBuilder};
use roundtable_protocol::bodies::ComponentDef;
use serde::Deserialize;

/// Where a repository keeps its architecture.
pub const FILE: &str = ".roundtable/architecture.toml";

#[derive(Debug, Deserialize)]
struct ArchitectureFile {
    #[serde(default)]
    components: Vec<ComponentDef>,
}

/// A repository's components, ready to match files.
#[derive(Debug, Clone)]
pub struct Architecture {
    /// The repository's root (the directory holding `.git`).
    pub root: PathBuf,
    pub components: Vec<ComponentDef>,
    /// What defines it (the file's text, or the inferred components), to notice a change.
    pub text: String,
    /// What it was inferred from; `None` when it was written.
    pub source: Option<String>,
    /// The files it was read from (absolute), to read it again when one changes.
    pub inputs: Vec<PathBuf>,
    matchers: Vec<GlobSet>,
}

/// Why an architecture file was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path} is not a valid architecture ({detail}); fix it: see the example in the docs of `roundtable arch`"
)]
pub struct ArchitectureError {
    pub path: String,
    pub detail: String,
}

impl Architecture {
    /// Reads the architecture of the repository at `root` from its file's `text`.
    pub fn parse(root: &Path, text: &str) -> Result<Architecture, ArchitectureError> {
        let refuse = |detail: String| ArchitectureError {
            path: root.join(FILE).display().to_string(),
            detail,
        };
        let file: ArchitectureFile =
            toml::from_str(text).map_err(|error| refuse(error.to_string()))?;
        let mut matchers = Vec::new();
        for component in &file.components {
            if component.id.is_empty() || component.id.len() > 64 {
                return Err(refuse(format!(
                    "a component id has 1 to 64 characters: {:?}",
                    component.id
                )));
            }
            let mut set = GlobSetBuilder::new();
            for pattern in &component.paths {
                let glob = Glob::new(pattern.trim_start_matches("./"))
                    .map_err(|error| refuse(format!("{}: {error}", component.id)))?;
                set.add(glob);
            }
            matchers.push(set.build().map_err(|error| refuse(error.to_string()))?);
        }
        for component in &file.components {
            for dependency in &component.depends_on {
                if !file.components.iter().any(|c| &c.id == dependency) {
                    return Err(refuse(format!(
                        "{} depends on {dependency:?}, which is not a component",
                        component.id
                    )));
                }
            }
        }
        Ok(Architecture {
            root: root.to_path_buf(),
            components: file.components,
            text: text.to_owned(),
            source: None,
            inputs: vec![root.join(FILE)],
            matchers,
        })
    }

    /// The architecture of the repository at `root` as its manifests imply it.
    pub fn inferred(root: &Path, inference: super::inferred::Inference) -> Architecture {
        let matchers = inference
            .components
            .iter()
            .map(|component| {
                let mut set = GlobSetBuilder::new();
                for pattern in &component.paths {
                    // A directory's name is taken as it is, whatever glob characters it has.
                    let (dir, all) = pattern
                        .strip_suffix("/**")
                        .map_or(("", true), |dir| (dir, false));
                    let glob = if all {
                        Glob::new("**")
                    } else {
                        Glob::new(&format!("{}/**", globset::escape(dir)))
                    };
                    if let Ok(glob) = glob {
                        set.add(glob);
                    }
                }
                set.build().unwrap_or_else(|_| GlobSet::empty())
            })
            .collect();
        let text = serde_json::to_string(&(&inference.source, &inference.components))
            .expect("components serialize");
        Architecture {
            root: root.to_path_buf(),
            components: inference.components,
            text,
            source: Some(inference.source),
            inputs: inference
                .manifests
                .iter()
                .map(|manifest| root.join(manifest))
                .collect(),
            matchers,
        }
    }

    /// The components a file (by absolute path) belongs to: every one whose globs match it
    /// when written; the package that holds it most closely when inferred (a file of a crate
    /// inside another crate's folder is the inner crate's).
    pub fn components_of(&self, file: &Path) -> Vec<&ComponentDef> {
        let Ok(relative) = file.strip_prefix(&self.root) else {
            return Vec::new();
        };
        let matching = self
            .components
            .iter()
            .zip(&self.matchers)
            .filter(|(_, matcher)| matcher.is_match(relative))
            .map(|(component, _)| component);
        if self.source.is_none() {
            return matching.collect();
        }
        let closeness = |component: &ComponentDef| {
            component
                .paths
                .iter()
                .map(String::len)
                .max()
                .unwrap_or_default()
        };
        matching
            .max_by_key(|component| closeness(component))
            .into_iter()
            .collect()
    }
}

/// The repository root above `file`: the nearest directory with a `.git` (a worktree's or a
/// submodule's `.git` file counts). Never looked for above the repository: a file in `/tmp`
/// or a home directory must not take its components from whoever wrote `/tmp/.roundtable/…`.
pub fn find_repository(file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

/// A repository's architecture as it was loaded, with the modification times of the files
/// it came from (and of the written file, present or not), to load it again when one
/// changes: a manifest edited, a member added, an architecture file written.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub architecture: Option<Architecture>,
    stamps: Vec<(PathBuf, Option<SystemTime>)>,
    /// When the stamps were last compared with the files.
    checked: Instant,
}

/// How often a loaded architecture's files are looked at again, at most: a burst of edits
/// costs one look, not one per file edited.
const RECHECK: Duration = Duration::from_secs(1);

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl Loaded {
    pub fn load(root: &Path, now: Instant) -> Loaded {
        let architecture = load(root);
        let mut files: Vec<PathBuf> = architecture
            .as_ref()
            .map(|architecture| architecture.inputs.clone())
            .unwrap_or_default();
        files.push(root.join(FILE));
        files.sort();
        files.dedup();
        let stamps = files
            .into_iter()
            .map(|file| {
                let stamp = modified(&file);
                (file, stamp)
            })
            .collect();
        Loaded {
            architecture,
            stamps,
            checked: now,
        }
    }

    /// The architecture of the repository at `root` as of `now`: loaded again when a file it
    /// came from changed (looked at no more than every [`RECHECK`]).
    pub fn current(&mut self, root: &Path, now: Instant) -> Option<Architecture> {
        if now.saturating_duration_since(self.checked) >= RECHECK {
            let changed = self
                .stamps
                .iter()
                .any(|(file, stamp)| modified(file) != *stamp);
            if changed {
                *self = Loaded::load(root, now);
            }
            self.checked = now;
        }
        self.architecture.clone()
    }
}

/// The architecture of the repository at `root`: its written file when it has one (a broken
/// one is logged and none is used: the person's file is never second-guessed), else what
/// its manifests imply; `None` for a repository with neither.
pub fn load(root: &Path) -> Option<Architecture> {
    match std::fs::read_to_string(root.join(FILE)) {
        Ok(text) => match Architecture::parse(root, &text) {
            Ok(architecture) => Some(architecture),
            Err(error) => {
                tracing::warn!(%error, "ignoring an architecture file");
                None
            }
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            // A home directory kept in git is described by its manifests only, never by
            // its folders (`Documents`, `Downloads`…).
            let is_home = roundtable_platform::places::home().is_some_and(|home| home == root);
            super::inferred::infer(&super::inferred::Disk(root), !is_home)
                .map(|inference| Architecture::inferred(root, inference))
        }
        Err(error) => {
            tracing::warn!(%error, file = %root.join(FILE).display(), "cannot read the architecture file");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_is_its_written_architecture_else_what_its_manifests_imply() {
        let dir = tempfile::tempdir().unwrap();
        let planted = dir.path().join(FILE);
        std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
        std::fs::write(&planted, ARCHITECTURE).unwrap();
        // A file in no repository, under a directory with an architecture file: none.
        let loose = dir.path().join("notes/todo.md");
        assert_eq!(find_repository(&loose), None);
        // A repository with manifests and no file: what they imply.
        let repo = dir.path().join("work/repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("lexer")).unwrap();
        std::fs::write(
            repo.join("Cargo.toml"),
            "[workspace]\nmembers = [\"lexer\"]\n",
        )
        .unwrap();
        std::fs::write(
            repo.join("lexer/Cargo.toml"),
            "[package]\nname = \"lexer\"\n",
        )
        .unwrap();
        assert_eq!(
            find_repository(&repo.join("src/lib.rs")),
            Some(repo.clone())
        );
        let inferred = load(&repo).unwrap();
        assert_eq!(inferred.source.as_deref(), Some("Cargo workspace"));
        assert_eq!(inferred.components[0].id, "lexer");
        assert!(inferred.inputs.contains(&repo.join("lexer/Cargo.toml")));
        // Its own written file wins.
        std::fs::create_dir_all(repo.join(".roundtable")).unwrap();
        std::fs::write(repo.join(FILE), ARCHITECTURE).unwrap();
        let written = load(&repo).unwrap();
        assert_eq!(written.source, None);
        assert_eq!(written.components.len(), 2);
        // A broken one is not second-guessed with an inferred one.
        std::fs::write(repo.join(FILE), "components = 3").unwrap();
        assert!(load(&repo).is_none());
        // A worktree or submodule has a `.git` file: it is a root too.
        let sub = repo.join("vendor/sub");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(".git"), "gitdir: ../../.git/modules/sub\n").unwrap();
        assert_eq!(find_repository(&sub.join("x.rs")), Some(sub));
    }

    /// A directory opened so its times can be set (Windows opens one only with backup
    /// semantics, and sets times through a handle that may write attributes).
    fn open_directory(path: &Path) -> std::fs::File {
        #[cfg(windows)]
        {
            use std::os::windows::fs::OpenOptionsExt as _;
            const FILE_WRITE_ATTRIBUTES: u32 = 0x100;
            const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
            std::fs::OpenOptions::new()
                .access_mode(FILE_WRITE_ATTRIBUTES)
                .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
                .open(path)
                .unwrap()
        }
        #[cfg(not(windows))]
        {
            std::fs::File::open(path).unwrap()
        }
    }

    #[test]
    fn a_loaded_architecture_is_read_again_when_a_manifest_changes() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("a")).unwrap();
        std::fs::create_dir_all(repo.join("b")).unwrap();
        std::fs::write(repo.join("a/Cargo.toml"), "[package]\nname = \"a\"\n").unwrap();
        std::fs::write(repo.join("b/Cargo.toml"), "[package]\nname = \"b\"\n").unwrap();
        let manifest = repo.join("Cargo.toml");
        std::fs::write(&manifest, "[workspace]\nmembers = [\"a\"]\n").unwrap();
        let ids = |architecture: Option<Architecture>| -> Vec<String> {
            architecture
                .map(|a| a.components.into_iter().map(|c| c.id).collect())
                .unwrap_or_default()
        };
        let start = Instant::now();
        let mut loaded = Loaded::load(repo, start);
        assert_eq!(ids(loaded.current(repo, start)), ["a"]);
        // A member added: the manifest's time moves on.
        std::fs::write(&manifest, "[workspace]\nmembers = [\"a\", \"b\"]\n").unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&manifest)
            .unwrap()
            .set_modified(later)
            .unwrap();
        // Not looked at again within the recheck interval; then read again.
        assert_eq!(ids(loaded.current(repo, start + RECHECK / 2)), ["a"]);
        assert_eq!(ids(loaded.current(repo, start + RECHECK)), ["a", "b"]);
        // A member's folder added, the root manifest untouched: read again too.
        std::fs::create_dir_all(repo.join("c")).unwrap();
        std::fs::write(repo.join("c/Cargo.toml"), "[package]\nname = \"c\"\n").unwrap();
        std::fs::write(&manifest, "[workspace]\nmembers = [\"*\"]\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&manifest)
            .unwrap()
            .set_modified(later + Duration::from_secs(5))
            .unwrap();
        assert_eq!(
            ids(loaded.current(repo, start + RECHECK * 2)),
            ["a", "b", "c"]
        );
        std::fs::create_dir_all(repo.join("d")).unwrap();
        std::fs::write(repo.join("d/Cargo.toml"), "[package]\nname = \"d\"\n").unwrap();
        open_directory(repo)
            .set_modified(later + Duration::from_secs(10))
            .unwrap();
        assert_eq!(
            ids(loaded.current(repo, start + RECHECK * 3)),
            ["a", "b", "c", "d"]
        );
        // A written file appears: it replaces the inferred one.
        std::fs::create_dir_all(repo.join(".roundtable")).unwrap();
        std::fs::write(repo.join(FILE), ARCHITECTURE).unwrap();
        assert_eq!(
            ids(loaded.current(repo, start + RECHECK * 4)),
            ["lexer", "parser"]
        );
    }

    #[test]
    fn an_inferred_file_belongs_to_the_package_that_holds_it_most_closely() {
        let inference = crate::work::inferred::Inference {
            components: ["", "app", "app/plugins/[x]"]
                .iter()
                .map(|dir| ComponentDef {
                    id: if dir.is_empty() {
                        "root".into()
                    } else {
                        (*dir).into()
                    },
                    name: (*dir).into(),
                    description: None,
                    paths: vec![if dir.is_empty() {
                        "**".into()
                    } else {
                        format!("{dir}/**")
                    }],
                    depends_on: Vec::new(),
                })
                .collect(),
            source: "Cargo workspace".into(),
            manifests: Vec::new(),
        };
        let architecture = Architecture::inferred(Path::new("/repo"), inference);
        let ids = |path: &str| -> Vec<String> {
            architecture
                .components_of(Path::new(path))
                .iter()
                .map(|c| c.id.clone())
                .collect()
        };
        assert_eq!(ids("/repo/app/plugins/[x]/lib.rs"), ["app/plugins/[x]"]);
        assert_eq!(ids("/repo/app/src/main.rs"), ["app"]);
        assert_eq!(ids("/repo/README.md"), ["root"]);
        assert!(ids("/elsewhere/app/src/main.rs").is_empty());
    }

    const ARCHITECTURE: &str = r#"
[[components]]
id = "lexer"
name = "Lexer"
paths = ["src/lexer/**", "src/token.rs"]
depends_on = []

[[components]]
id = "parser"
name = "Parser"
description = "Turns tokens into a tree"
paths = ["src/parser/**"]
depends_on = ["lexer"]
"#;

    #[test]
    fn files_belong_to_the_components_whose_globs_they_match() {
        let architecture = Architecture::parse(Path::new("/repo"), ARCHITECTURE).unwrap();
        let ids = |path: &str| -> Vec<String> {
            architecture
                .components_of(Path::new(path))
                .iter()
                .map(|c| c.id.clone())
                .collect()
        };
        assert_eq!(ids("/repo/src/parser/expr.rs"), ["parser"]);
        assert_eq!(ids("/repo/src/token.rs"), ["lexer"]);
        assert!(ids("/repo/README.md").is_empty());
        assert!(ids("/elsewhere/src/parser/expr.rs").is_empty());
        assert_eq!(architecture.components[1].depends_on, ["lexer"]);
    }

    #[test]
    fn a_bad_architecture_says_what_is_wrong() {
        let error = Architecture::parse(
            Path::new("/repo"),
            "[[components]]\nid = \"a\"\nname = \"A\"\npaths = []\ndepends_on = [\"ghost\"]\n",
        )
        .unwrap_err();
        assert!(error.to_string().contains("ghost"), "{error}");
        assert!(Architecture::parse(Path::new("/repo"), "components = 3").is_err());
        assert!(
            Architecture::parse(
                Path::new("/repo"),
                "[[components]]\nid = \"a\"\nname = \"A\"\npaths = [\"src/[\"]\ndepends_on = []\n"
            )
            .is_err()
        );
    }
}
