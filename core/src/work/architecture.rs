//! A repository's architecture, as its team writes it down in
//! `.roundtable/architecture.toml`: components, the files that belong to each (globs
//! relative to the repository), and what each depends on. A file an agent edits marks its
//! component as being worked on by that agent.
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
    /// The repository's root (the directory holding `.roundtable/`).
    pub root: PathBuf,
    pub components: Vec<ComponentDef>,
    /// The file's text, to notice when it changes.
    pub text: String,
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
            matchers,
        })
    }

    /// The components a file (by absolute path) belongs to.
    pub fn components_of(&self, file: &Path) -> Vec<&ComponentDef> {
        let Ok(relative) = file.strip_prefix(&self.root) else {
            return Vec::new();
        };
        self.components
            .iter()
            .zip(&self.matchers)
            .filter(|(_, matcher)| matcher.is_match(relative))
            .map(|(component, _)| component)
            .collect()
    }
}

/// The repository root above `file` (the nearest directory with a `.git`), when it has an
/// architecture file. Never looked for above the repository: a file in `/tmp` or a home
/// directory must not take its components from whoever wrote `/tmp/.roundtable/…`.
pub fn find_root(file: &Path) -> Option<PathBuf> {
    let root = file
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").exists())?;
    root.join(FILE).is_file().then(|| root.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_architecture_file_is_looked_for_at_the_repository_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let planted = dir.path().join(FILE);
        std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
        std::fs::write(&planted, "[[components]]\n").unwrap();
        // A file in no repository, under a directory with an architecture file: none.
        let loose = dir.path().join("notes/todo.md");
        assert_eq!(find_root(&loose), None);
        // In a repository without one: none, though a directory above has one.
        let repo = dir.path().join("work/repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        assert_eq!(find_root(&repo.join("src/lib.rs")), None);
        // The repository's own.
        std::fs::create_dir_all(repo.join(".roundtable")).unwrap();
        std::fs::write(repo.join(FILE), "[[components]]\n").unwrap();
        assert_eq!(find_root(&repo.join("src/lib.rs")), Some(repo.clone()));
        // A worktree or submodule has a `.git` file: it is a root too.
        let sub = repo.join("vendor/sub");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(".git"), "gitdir: ../../.git/modules/sub\n").unwrap();
        assert_eq!(find_root(&sub.join("x.rs")), None);
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
