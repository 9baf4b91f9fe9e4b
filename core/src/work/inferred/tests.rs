//! Inference over repositories shaped like real ones (written here as maps of files), and
//! over this repository itself.

use super::*;

/// A repository in memory: file paths (relative) and their text.
struct Files(BTreeMap<String, String>);

impl Files {
    fn new(files: &[(&str, &str)]) -> Files {
        Files(
            files
                .iter()
                .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
                .collect(),
        )
    }
}

impl Tree for Files {
    fn read(&self, path: &Path) -> Option<String> {
        self.0.get(path.to_str()?).cloned()
    }

    fn dirs(&self, path: &Path) -> Vec<String> {
        let prefix = match path.to_str().unwrap() {
            "" => String::new(),
            dir => format!("{dir}/"),
        };
        let dirs: BTreeSet<String> = self
            .0
            .keys()
            .filter_map(|file| {
                let rest = file.strip_prefix(&prefix)?;
                let (dir, _) = rest.split_once('/')?;
                Some(dir.to_owned())
            })
            .collect();
        dirs.into_iter().collect()
    }
}

/// Each component as `id: paths -> depends_on`.
fn shape(inference: &Inference) -> Vec<String> {
    inference
        .components
        .iter()
        .map(|c| {
            format!(
                "{}: {} -> {}",
                c.id,
                c.paths.join(" "),
                c.depends_on.join(",")
            )
        })
        .collect()
}

#[test]
fn a_cargo_workspace_gives_its_members_and_their_path_dependencies() {
    let repo = Files::new(&[
        (
            "Cargo.toml",
            r#"
[workspace]
members = ["crates/*", "app"]
exclude = ["crates/scratch"]

[workspace.dependencies]
lexer = { path = "crates/lexer" }
serde = "1"
"#,
        ),
        ("crates/lexer/Cargo.toml", "[package]\nname = \"lexer\"\n"),
        (
            "crates/parser/Cargo.toml",
            "[package]\nname = \"parser\"\n[dependencies]\nlexer = { workspace = true }\nserde = \"1\"\n",
        ),
        (
            "crates/scratch/Cargo.toml",
            "[package]\nname = \"scratch\"\n",
        ),
        (
            "app/Cargo.toml",
            "[package]\nname = \"app\"\n[dependencies]\nparser = { path = \"../crates/parser\" }\n[dev-dependencies]\nlex = { package = \"lexer\", path = \"../crates/lexer\" }\n",
        ),
        ("crates/lexer/src/lib.rs", ""),
        ("target/debug/x", ""),
    ]);
    let inference = infer(&repo, true).unwrap();
    assert_eq!(inference.source, "Cargo workspace");
    assert_eq!(
        shape(&inference),
        [
            "app: app/** -> lexer,parser",
            "lexer: crates/lexer/** -> ",
            "parser: crates/parser/** -> lexer",
        ]
    );
    assert!(
        inference
            .manifests
            .contains(&PathBuf::from("crates/parser/Cargo.toml"))
    );
}

#[test]
fn js_workspaces_give_their_packages_and_dependencies_by_name() {
    let npm = Files::new(&[
        (
            "package.json",
            r#"{"name": "monorepo", "private": true, "workspaces": ["packages/*", "!packages/old"]}"#,
        ),
        (
            "packages/ui/package.json",
            r#"{"name": "@acme/ui", "dependencies": {"@acme/core": "*", "react": "19"}}"#,
        ),
        ("packages/core/package.json", r#"{"name": "@acme/core"}"#),
        ("packages/old/package.json", r#"{"name": "@acme/old"}"#),
        (
            "packages/ui/node_modules/react/package.json",
            r#"{"name": "react"}"#,
        ),
    ]);
    let inference = infer(&npm, true).unwrap();
    assert_eq!(inference.source, "npm packages");
    assert_eq!(
        shape(&inference),
        [
            "monorepo: ** -> ",
            "@acme/core: packages/core/** -> ",
            "@acme/ui: packages/ui/** -> @acme/core",
        ]
    );
    // pnpm keeps its list in pnpm-workspace.yaml; yarn's may be `workspaces.packages`.
    let pnpm = Files::new(&[
        (
            "pnpm-workspace.yaml",
            "packages:\n  - 'apps/*' # the apps\n  - \"libs/*\"\ncatalog:\n  react: 19\n",
        ),
        (
            "apps/web/package.json",
            r#"{"name": "web", "devDependencies": {"kit": "workspace:*"}}"#,
        ),
        ("libs/kit/package.json", r#"{"name": "kit"}"#),
    ]);
    assert_eq!(
        shape(&infer(&pnpm, true).unwrap()),
        ["web: apps/web/** -> kit", "kit: libs/kit/** -> "]
    );
    let yarn = Files::new(&[
        (
            "package.json",
            r#"{"name": "root", "workspaces": {"packages": ["tools/cli"]}}"#,
        ),
        (
            "tools/cli/package.json",
            r#"{"name": "cli", "peerDependencies": {"root": "*"}}"#,
        ),
    ]);
    assert_eq!(
        shape(&infer(&yarn, true).unwrap()),
        ["root: ** -> ", "cli: tools/cli/** -> root"]
    );
}

#[test]
fn go_work_and_python_workspaces_give_their_modules_and_packages() {
    let go = Files::new(&[
        (
            "go.work",
            "go 1.22\n\nuse (\n\t./api // the service\n\t./lib\n)\n",
        ),
        (
            "api/go.mod",
            "module example.com/api\n\ngo 1.22\n\nrequire (\n\texample.com/lib v0.0.0\n\tgithub.com/x/y v1.2.3\n)\n",
        ),
        ("lib/go.mod", "module example.com/lib\n"),
    ]);
    let inference = infer(&go, true).unwrap();
    assert_eq!(inference.source, "Go modules");
    assert_eq!(
        shape(&inference),
        [
            "example.com/api: api/** -> example.com/lib",
            "example.com/lib: lib/** -> "
        ]
    );
    let python = Files::new(&[
        (
            "pyproject.toml",
            "[project]\nname = \"Acme_App\"\ndependencies = [\"acme-core>=1\", \"requests\"]\n[tool.uv.workspace]\nmembers = [\"packages/*\"]\n",
        ),
        (
            "packages/core/pyproject.toml",
            "[project]\nname = \"acme_core\"\n",
        ),
        ("packages/notes/README.md", "not a package"),
    ]);
    assert_eq!(
        shape(&infer(&python, true).unwrap()),
        [
            "acme-app: ** -> acme-core",
            "acme-core: packages/core/** -> "
        ]
    );
}

#[test]
fn without_manifests_the_top_level_folders_are_the_components() {
    let repo = Files::new(&[
        ("src/main.c", ""),
        ("docs/index.md", ""),
        (".github/workflows/ci.yml", ""),
        ("build/out.o", ""),
        ("README.md", ""),
    ]);
    let inference = infer(&repo, true).unwrap();
    assert_eq!(inference.source, "top-level folders");
    assert_eq!(shape(&inference), ["docs: docs/** -> ", "src: src/** -> "]);
    assert_eq!(infer(&Files::new(&[("README.md", "")]), true), None);
}

#[test]
fn broken_manifests_and_escaping_paths_are_passed_over() {
    let repo = Files::new(&[
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"a\", \"b\", \"c\"]\n",
        ),
        (
            "a/Cargo.toml",
            "[package]\nname = \"a\"\n[dependencies]\nx = { path = \"../../outside\" }\n",
        ),
        ("b/Cargo.toml", "this is not toml ["),
        ("c/Cargo.toml", "[package]\nversion = \"1\"\n"),
        ("package.json", "{not json"),
    ]);
    assert_eq!(shape(&infer(&repo, true).unwrap()), ["a: a/** -> "]);
    // Two packages of one name stay apart.
    let twins = Files::new(&[
        ("Cargo.toml", "[workspace]\nmembers = [\"x\", \"y\"]\n"),
        ("x/Cargo.toml", "[package]\nname = \"twin\"\n"),
        (
            "y/Cargo.toml",
            "[package]\nname = \"twin\"\n[dependencies]\nt = { path = \"../x\" }\n",
        ),
    ]);
    assert_eq!(
        shape(&infer(&twins, true).unwrap()),
        ["twin (x): x/** -> ", "twin (y): y/** -> twin (x)"]
    );
}

#[test]
fn this_repository_is_a_cargo_workspace_and_an_npm_package() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let inference = infer(&Disk(root), true).unwrap();
    assert_eq!(inference.source, "Cargo workspace, npm packages");
    let component = |id: &str| {
        inference
            .components
            .iter()
            .find(|component| component.id == id)
            .unwrap_or_else(|| panic!("no {id} in {:?}", shape(&inference)))
    };
    assert_eq!(component("roundtable-core").paths, ["core/**"]);
    assert!(
        component("roundtable-core")
            .depends_on
            .contains(&"roundtable-protocol".to_owned())
    );
    assert!(
        component("roundtable-hub")
            .depends_on
            .contains(&"roundtable-protocol".to_owned())
    );
    assert!(
        !component("roundtable-hub")
            .depends_on
            .contains(&"roundtable-core".to_owned())
    );
    assert_eq!(component("roundtable-ui").paths, ["ui/**"]);
}

#[test]
fn a_workspace_too_large_for_one_board_falls_back_to_its_folders() {
    let mut files = vec![(
        "package.json".to_owned(),
        r#"{"name": "big", "workspaces": ["packages/*"]}"#.to_owned(),
    )];
    for n in 0..600 {
        let deps: Vec<String> = (0..n.min(20))
            .map(|d| format!(r#""package-number-{d}": "*""#))
            .collect();
        files.push((
            format!("packages/p{n}/package.json"),
            format!(
                r#"{{"name": "package-number-{n}", "dependencies": {{{}}}}}"#,
                deps.join(",")
            ),
        ));
    }
    let repo = Files(files.into_iter().collect());
    let inference = infer(&repo, true).unwrap();
    assert_eq!(
        inference.source,
        "top-level folders (its 601 packages are more than one board holds)"
    );
    assert_eq!(shape(&inference), ["packages: packages/** -> "]);
}

#[test]
fn members_stay_inside_the_repository_and_ids_stay_unique() {
    let repo = Files::new(&[
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\".\", \"./xtask\", \"../other\", \"/etc\", \"a/../../x\"]\n[package]\nname = \"app\"\n",
        ),
        ("xtask/Cargo.toml", "[package]\nname = \"xtask\"\n"),
    ]);
    let inference = infer(&repo, true).unwrap();
    assert_eq!(shape(&inference), ["app: ** -> ", "xtask: xtask/** -> "]);
    assert!(
        inference
            .manifests
            .iter()
            .all(|path| path.is_relative() && !path.starts_with("..")),
        "{:?}",
        inference.manifests
    );
    // Two long names alike in their first 64 characters stay two components.
    let long = "github.com/some-organization/some-monorepo-name/services/billing";
    let go = Files::new(&[
        ("go.work", "use (\n  ./api\n  ./worker\n)\n"),
        (
            "api/go.mod",
            &format!("module {long}-api\nrequire {long}-worker v0\n"),
        ),
        ("worker/go.mod", &format!("module {long}-worker\n")),
    ]);
    let inference = infer(&go, true).unwrap();
    let ids: Vec<&str> = inference.components.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(|id| id.chars().count() <= 64), "{ids:?}");
    assert_eq!(inference.components[0].depends_on, [ids[1]]);
}

#[test]
fn a_home_directory_is_not_described_by_its_folders_and_what_was_looked_at_is_kept() {
    let home = Files::new(&[("Documents/notes.md", ""), ("Downloads/x.zip", "")]);
    assert_eq!(infer(&home, false), None);
    assert!(infer(&home, true).is_some());
    let repo = Files::new(&[
        ("Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n"),
        ("crates/a/Cargo.toml", "[package]\nname = \"a\"\n"),
    ]);
    let inference = infer(&repo, true).unwrap();
    // The folder a new member would appear in, and the manifests looked for but absent.
    for looked in [
        "crates",
        "Cargo.toml",
        "crates/a/Cargo.toml",
        "package.json",
        "go.work",
    ] {
        assert!(
            inference.manifests.contains(&PathBuf::from(looked)),
            "{looked} in {:?}",
            inference.manifests
        );
    }
}

#[test]
fn a_dependency_by_name_is_on_a_package_of_the_same_kind() {
    // A Rust crate and an npm package both called `core`: the web app's `core` is the npm one.
    let repo = Files::new(&[
        ("Cargo.toml", "[workspace]\nmembers = [\"crates/core\"]\n"),
        ("crates/core/Cargo.toml", "[package]\nname = \"core\"\n"),
        (
            "package.json",
            r#"{"name": "root", "workspaces": ["web/*"]}"#,
        ),
        ("web/core/package.json", r#"{"name": "core"}"#),
        (
            "web/app/package.json",
            r#"{"name": "app", "dependencies": {"core": "*"}}"#,
        ),
    ]);
    assert_eq!(
        shape(&infer(&repo, true).unwrap()),
        [
            "root: ** -> ",
            "core (crates/core): crates/core/** -> ",
            "app: web/app/** -> core (web/core)",
            "core (web/core): web/core/** -> ",
        ]
    );
}
