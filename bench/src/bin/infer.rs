//! `roundtable-bench-infer`: inferring a repository's architecture from its manifests, on a
//! generated repository of `--files` files (a Cargo workspace of `--crates` crates, an npm
//! workspace of as many packages, each crate's `src/` holding the rest of the files), and on
//! the same files with no manifest (the top-level folders). Each shape `--runs` times;
//! prints the median, the fastest and the slowest, and the components found.

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use clap::Parser;
use roundtable_core::work::architecture::Architecture;
use roundtable_core::work::inferred::{Disk, infer};

#[derive(Debug, Parser)]
#[command(
    name = "roundtable-bench-infer",
    about = "Architecture inference over a large repository."
)]
struct Args {
    /// Files in the repository, manifests included.
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    /// Crates in the Cargo workspace (and packages in the npm one).
    #[arg(long, default_value_t = 100)]
    crates: usize,
    #[arg(long, default_value_t = 21)]
    runs: usize,
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::create_dir_all(path.parent().expect("a file has a folder"))?;
    std::fs::write(path, text)?;
    Ok(())
}

/// The repository: `crates/cN` (depending on `c(N-1)`), `packages/pN` (depending on
/// `p(N-1)`), and source files spread over the crates until `files` files in all.
fn generate(root: &Path, files: usize, crates: usize, manifests: bool) -> Result<()> {
    let mut written = 0;
    if manifests {
        write(
            &root.join("Cargo.toml"),
            "[workspace]\nmembers = [\"crates/*\"]\n",
        )?;
        write(
            &root.join("package.json"),
            r#"{"name": "root", "private": true, "workspaces": ["packages/*"]}"#,
        )?;
        written += 2;
        for n in 0..crates {
            let dependency = if n == 0 {
                String::new()
            } else {
                format!(
                    "[dependencies]\nc{} = {{ path = \"../c{}\" }}\n",
                    n - 1,
                    n - 1
                )
            };
            write(
                &root.join(format!("crates/c{n}/Cargo.toml")),
                &format!("[package]\nname = \"c{n}\"\n{dependency}"),
            )?;
            let dependency = if n == 0 {
                String::new()
            } else {
                format!(r#", "dependencies": {{"p{}": "*"}}"#, n - 1)
            };
            write(
                &root.join(format!("packages/p{n}/package.json")),
                &format!(r#"{{"name": "p{n}"{dependency}}}"#),
            )?;
            written += 2;
        }
    }
    let mut n = 0;
    while written < files {
        let krate = n % crates;
        write(
            &root.join(format!("crates/c{krate}/src/m{n}.rs")),
            "// a module\n",
        )?;
        written += 1;
        n += 1;
    }
    Ok(())
}

fn measure(root: &Path, runs: usize) -> (Vec<Duration>, usize, String) {
    let mut times = Vec::with_capacity(runs);
    let mut found = (0, String::new());
    for _ in 0..runs {
        let started = Instant::now();
        let inference = infer(&Disk(root), true);
        let architecture = inference.map(|inference| Architecture::inferred(root, inference));
        times.push(started.elapsed());
        if let Some(architecture) = architecture {
            found = (
                architecture.components.len(),
                architecture.source.unwrap_or_default(),
            );
        }
    }
    times.sort();
    (times, found.0, found.1)
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.crates > 0 && args.runs > 0,
        "--crates and --runs must be at least 1"
    );
    println!(
        "architecture inference, a repository of {} files, {} runs each (median, fastest, slowest)",
        args.files, args.runs
    );
    for (shape, manifests) in [("manifests", true), ("no manifest", false)] {
        let dir = tempfile::tempdir()?;
        generate(dir.path(), args.files, args.crates, manifests)?;
        let (times, components, source) = measure(dir.path(), args.runs);
        println!(
            "{shape:>12}: {:>8.2?} {:>8.2?} {:>8.2?}  {components} components from the {source}",
            times[times.len() / 2],
            times[0],
            times[times.len() - 1],
        );
    }
    Ok(())
}
