//! `roundtable-bench-scan`: reading a large corpus of agent logs, against ccusage.
//!
//! The corpus is built from sample logs (the public ones in `shared/fixtures/agent-logs`, or
//! any directory laid out as `claude-code/**.jsonl` and `codex/**.jsonl`): each file is copied
//! many times with new ids (sessions, messages, requests, records), until the corpus reaches
//! `--megabytes`. It is kept under `--corpus` and reused while its description matches.
//!
//! Then, in one run:
//! - the first scan: `roundtable scan --json` against `ccusage daily --offline --json` (both
//!   read every log of the corpus and add them up), alternating, `--runs` rounds each; and
//!   Claude totals compared with `ccusage claude session` (they must be equal);
//! - the watcher: its first pass over the corpus into a cache, then one line appended to a
//!   transcript and the time until the cache holds it (median of `--appends`), then a
//!   restart after one more line (which reads only what is new).

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use roundtable_bench::watching::{self, median};
use serde_json::Value;

#[derive(Debug, Parser)]
#[command(
    name = "roundtable-bench-scan",
    about = "Agent log scan against ccusage."
)]
struct Args {
    /// Sample logs: `claude-code/` and `codex/` below it.
    #[arg(long, default_value = "../shared/fixtures/agent-logs")]
    samples: PathBuf,
    /// Where the corpus is built (a HOME with .claude and .codex).
    #[arg(long, default_value = "target/bench-corpus")]
    corpus: PathBuf,
    #[arg(long, default_value_t = 1024)]
    megabytes: u64,
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[arg(long, default_value_t = 15)]
    appends: usize,
    /// The `roundtable` binary (default: next to this one).
    #[arg(long)]
    roundtable: Option<PathBuf>,
    #[arg(long, default_value = "target/node/node_modules/.bin/ccusage")]
    ccusage: PathBuf,
}

/// Gives every id of a record a copy number, so copies are distinct sessions and requests.
fn renumber(value: &mut Value, copy: usize) {
    const IDS: [&str; 10] = [
        "sessionId",
        "uuid",
        "parentUuid",
        "leafUuid",
        "requestId",
        "id",
        "tool_use_id",
        "promptId",
        "agentId",
        "logicalParentUuid",
    ];
    match value {
        Value::Object(map) => {
            for (key, member) in map.iter_mut() {
                match member {
                    Value::String(text) if IDS.contains(&key.as_str()) => {
                        text.push_str(&format!("-c{copy}"));
                    }
                    _ => renumber(member, copy),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                renumber(item, copy);
            }
        }
        _ => {}
    }
}

fn sample_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sample_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "jsonl")
            && !path.to_string_lossy().contains("hook_logs")
        {
            out.push(path);
        }
    }
}

/// Builds the corpus (or reuses it); returns its size in bytes and its file count.
fn build_corpus(args: &Args) -> Result<(u64, usize)> {
    let marker = args.corpus.join("corpus.txt");
    let description = format!("{} MB from {}\n", args.megabytes, args.samples.display());
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(description.as_str()) {
        let mut files = Vec::new();
        sample_files(&args.corpus, &mut files);
        let bytes = files
            .iter()
            .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
            .sum();
        return Ok((bytes, files.len()));
    }
    let _ = std::fs::remove_dir_all(&args.corpus);
    let mut claude = Vec::new();
    sample_files(&args.samples.join("claude-code"), &mut claude);
    let mut codex = Vec::new();
    sample_files(&args.samples.join("codex"), &mut codex);
    ensure!(
        !claude.is_empty() && !codex.is_empty(),
        "no sample logs under {}",
        args.samples.display()
    );
    let samples: Vec<(bool, Vec<Value>, Vec<u8>)> = claude
        .iter()
        .map(|path| (true, path))
        .chain(codex.iter().map(|path| (false, path)))
        .map(|(is_claude, path)| {
            let bytes = std::fs::read(path)?;
            let records = bytes
                .split(|&b| b == b'\n')
                .filter(|line| !line.is_empty())
                .filter_map(|line| serde_json::from_slice(line).ok())
                .collect();
            Ok((is_claude, records, bytes))
        })
        .collect::<Result<_>>()?;
    let target = args.megabytes * 1_000_000;
    let mut written = 0u64;
    let mut files = 0usize;
    let mut copy = 0usize;
    while written < target {
        copy += 1;
        for (index, (is_claude, records, _)) in samples.iter().enumerate() {
            let mut text = Vec::new();
            let mut thread = String::new();
            for record in records {
                let mut record = record.clone();
                renumber(&mut record, copy);
                if !is_claude && record["type"] == "session_meta" {
                    thread = record["payload"]["id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                }
                serde_json::to_writer(&mut text, &record)?;
                text.push(b'\n');
            }
            let path = if *is_claude {
                args.corpus
                    .join(format!(".claude/projects/-work-p{}", copy % 50))
                    .join(format!("s{index}-c{copy}.jsonl"))
            } else {
                args.corpus
                    .join(format!(".codex/sessions/2026/02/{:02}", 1 + copy % 28))
                    .join(format!("rollout-2026-02-23T12-00-00-{thread}.jsonl"))
            };
            std::fs::create_dir_all(path.parent().context("a parent")?)?;
            std::fs::write(&path, &text)?;
            written += text.len() as u64;
            files += 1;
        }
    }
    std::fs::write(&marker, description)?;
    Ok((written, files))
}

fn timed(command: &mut Command) -> Result<(Duration, Vec<u8>)> {
    let started = Instant::now();
    let output = command.output()?;
    let elapsed = started.elapsed();
    if !output.status.success() {
        bail!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok((elapsed, output.stdout))
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let roundtable = match &args.roundtable {
        Some(path) => path.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("the bench's directory")?
            .join("roundtable"),
    };
    let built = Instant::now();
    let (bytes, files) = build_corpus(&args)?;
    println!(
        "# roundtable-bench-scan: corpus of {files} files, {:.0} MB ({} ready in {:.1} s), {} rounds",
        bytes as f64 / 1e6,
        args.corpus.display(),
        built.elapsed().as_secs_f64(),
        args.runs
    );
    let home = args.corpus.canonicalize()?;
    let ours = || {
        let mut command = Command::new(&roundtable);
        command
            .args(["scan", "--json"])
            .env("HOME", &home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME");
        command
    };
    // ccusage finds the Codex rollouts only through CODEX_HOME: both sides read every log.
    let theirs = |what: &[&str]| {
        let mut command = Command::new(&args.ccusage);
        command
            .args(what)
            .env("HOME", &home)
            .env("CODEX_HOME", home.join(".codex"))
            .env_remove("CLAUDE_CONFIG_DIR");
        command
    };
    println!("# round  roundtable_scan_s  ccusage_daily_s");
    let mut ours_times = Vec::new();
    let mut theirs_times = Vec::new();
    let mut report = Vec::new();
    for round in 1..=args.runs {
        let (ours_time, stdout) = timed(&mut ours())?;
        report = stdout;
        let (theirs_time, _) = timed(&mut theirs(&["daily", "--offline", "--json"]))?;
        println!(
            "  {round:>5}  {:.3}  {:.3}",
            ours_time.as_secs_f64(),
            theirs_time.as_secs_f64()
        );
        ours_times.push(ours_time);
        theirs_times.push(theirs_time);
    }
    let ours_median = median(&mut ours_times);
    let theirs_median = median(&mut theirs_times);
    println!(
        "first scan, median: roundtable {:.3} s ({:.0} MB/s), ccusage {:.3} s; ccusage/roundtable {:.2}x",
        ours_median.as_secs_f64(),
        bytes as f64 / 1e6 / ours_median.as_secs_f64(),
        theirs_median.as_secs_f64(),
        theirs_median.as_secs_f64() / ours_median.as_secs_f64()
    );
    // The Claude totals agree.
    let ours_report: Value = serde_json::from_slice(&report)?;
    let (_, claude) = timed(&mut theirs(&["claude", "session", "--offline", "--json"]))?;
    let claude: Value = serde_json::from_slice(&claude)?;
    let sum = |field: &str| -> u64 {
        ours_report["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["framework"] == "claude-code")
            .map(|s| s["tokens"][field].as_u64().unwrap_or(0))
            .sum()
    };
    let cost: f64 = ours_report["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["framework"] == "claude-code")
        .map(|s| s["cost_usd"].as_f64().unwrap_or(0.0))
        .sum();
    let totals = &claude["totals"];
    println!(
        "claude totals: roundtable input {} output {} cache_write {} cache_read {} ${:.4}; ccusage {} {} {} {} ${:.4}",
        sum("input"),
        sum("output"),
        sum("cache_write"),
        sum("cache_read"),
        cost,
        totals["inputTokens"],
        totals["outputTokens"],
        totals["cacheCreationTokens"],
        totals["cacheReadTokens"],
        totals["totalCost"].as_f64().unwrap_or(0.0)
    );
    ensure!(
        sum("input") == totals["inputTokens"].as_u64().unwrap_or(0)
            && sum("output") == totals["outputTokens"].as_u64().unwrap_or(0)
            && sum("cache_write") == totals["cacheCreationTokens"].as_u64().unwrap_or(0)
            && sum("cache_read") == totals["cacheReadTokens"].as_u64().unwrap_or(0),
        "the Claude totals differ from ccusage's"
    );

    // The watcher.
    let mut transcript = Vec::new();
    sample_files(&home.join(".claude/projects"), &mut transcript);
    let file = transcript.first().context("a transcript")?.clone();
    // The lines are taken out again at the end; ids differ from run to run all the same.
    let original_length = std::fs::metadata(&file)?.len();
    let run = std::process::id();
    // A response of the model, with its usage: what the view must show.
    let line = |n: usize| {
        format!(
            "{{\"type\":\"assistant\",\"sessionId\":\"appended-{run}\",\"uuid\":\"a{run}-{n}\",\"cwd\":\"/work\",\"timestamp\":\"2026-12-01T10:00:00.000Z\",\"requestId\":\"req_a{run}_{n}\",\"message\":{{\"id\":\"msg_a{run}_{n}\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[{{\"type\":\"text\",\"text\":\"line {n}\"}}],\"usage\":{{\"input_tokens\":12,\"output_tokens\":34,\"cache_read_input_tokens\":5600}}}}}}\n"
        )
    };
    let figures = watching::measure(&home, args.appends, |n| {
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)?
            .write_all(line(n).as_bytes())?;
        Ok(())
    })
    .await?;
    let (median_latency, max_latency) = figures.latency();
    println!(
        "watcher: first pass over the corpus into a cache: {:.1} s",
        figures.first_pass.as_secs_f64()
    );
    println!(
        "# appended line → in the cache, in order (ms): {}",
        figures.latencies_ms()
    );
    println!(
        "watcher: appended line → in the cache, median of {}: {:.1} ms (max {:.1} ms)",
        figures.latencies.len(),
        median_latency.as_secs_f64() * 1e3,
        max_latency.as_secs_f64() * 1e3
    );
    println!(
        "watcher: restart after one more line, caught up in {:.0} ms ({files} files looked at, one line read)",
        figures.restart.as_secs_f64() * 1e3
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)?
        .set_len(original_length)?;
    Ok(())
}
