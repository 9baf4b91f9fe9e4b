//! `roundtable-bench-opencode`: reading OpenCode's database (`opencode.db`) of many sessions.
//!
//! It builds, once per description, a database in OpenCode 1.18's layout (WAL mode; its
//! `session`, `message`, `part` and `todo` tables and their indexes) under `--corpus`:
//! `--sessions` sessions, each with `--steps` model steps (an assistant message with its
//! tokens, and a tool part that wrote a file) and a task list of three. Then, in one run:
//! - `roundtable scan --json` over it, `--runs` times (the first right after the build, its
//!   pages in the OS cache as they were written; the others warm), its totals checked;
//! - the watcher: its first pass into a fresh cache; then a model step inserted by a writer
//!   as OpenCode does (a transaction on its own connection), timed until the cache says it
//!   changed (median of `--appends`); then a restart after one more step.

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use roundtable_bench::watching::{self, median};
use rusqlite::{Connection, params};

#[derive(Debug, Parser)]
#[command(
    name = "roundtable-bench-opencode",
    about = "Reading OpenCode's database of many sessions."
)]
struct Args {
    /// Where the database is built (a HOME with `.local/share/opencode/opencode.db`).
    #[arg(long, default_value = "target/bench-opencode")]
    corpus: PathBuf,
    #[arg(long, default_value_t = 10_000)]
    sessions: usize,
    #[arg(long, default_value_t = 10)]
    steps: usize,
    #[arg(long, default_value_t = 5)]
    runs: usize,
    #[arg(long, default_value_t = 15)]
    appends: usize,
    /// The `roundtable` binary (default: next to this one).
    #[arg(long)]
    roundtable: Option<PathBuf>,
}

/// The tables Roundtable reads, with the indexes OpenCode 1.18 declares on them.
const SCHEMA: &str = "
    CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text,
        slug text NOT NULL, directory text NOT NULL, title text NOT NULL, version text NOT NULL,
        cost real DEFAULT 0 NOT NULL, model text, time_created integer NOT NULL,
        time_updated integer NOT NULL);
    CREATE INDEX session_project_idx ON session (project_id);
    CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
        time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
    CREATE INDEX message_session_idx ON message (session_id);
    CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
        time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
    CREATE INDEX part_message_idx ON part (message_id);
    CREATE INDEX part_session_idx ON part (session_id);
    CREATE TABLE todo (session_id text NOT NULL, content text NOT NULL, status text NOT NULL,
        priority text NOT NULL, position integer NOT NULL, time_created integer NOT NULL,
        time_updated integer NOT NULL, CONSTRAINT todo_pk PRIMARY KEY (session_id, position));
    CREATE INDEX todo_session_idx ON todo (session_id);";

const STEP_TOKENS: (u64, u64, u64, u64) = (1009, 42, 50, 200);

fn step_data() -> String {
    let (input, output, write, read) = STEP_TOKENS;
    format!(
        r#"{{"parentID":"msg_user","role":"assistant","mode":"build","agent":"build","path":{{"cwd":"/src/app","root":"/src/app"}},"cost":0.0039,"tokens":{{"total":{},"input":{input},"output":{output},"reasoning":0,"cache":{{"write":{write},"read":{read}}}}},"modelID":"claude-sonnet-4-5","providerID":"anthropic","time":{{"created":1,"completed":2}},"finish":"tool-calls"}}"#,
        input + output + write + read
    )
}

fn insert_step(
    connection: &Connection,
    session: usize,
    step: &str,
    at: i64,
) -> rusqlite::Result<()> {
    let session_id = format!("ses_{session:06}");
    let message_id = format!("msg_{session:06}_{step}");
    connection.execute(
        "INSERT INTO message VALUES (?1, ?2, ?3, ?3, ?4)",
        params![message_id, session_id, at, step_data()],
    )?;
    let part = format!(
        r#"{{"type":"tool","tool":"write","callID":"toolu_{session}_{step}","state":{{"status":"completed","input":{{"filePath":"/src/app/src/file_{step}.rs","content":"fn main() {{}}\n"}},"output":"Wrote file successfully.","metadata":{{"exists":false,"truncated":false}},"title":"file_{step}.rs","time":{{"start":1,"end":2}}}}}}"#
    );
    connection.execute(
        "INSERT INTO part VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
        params![
            format!("prt_{session:06}_{step}"),
            message_id,
            session_id,
            at,
            part
        ],
    )?;
    Ok(())
}

/// Builds the database unless one of this description is there; its path.
fn build(args: &Args) -> Result<PathBuf> {
    let dir = args.corpus.join(".local/share/opencode");
    let path = dir.join("opencode.db");
    let description = format!("sessions={} steps={} v1", args.sessions, args.steps);
    let marker = args.corpus.join("description");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(description.as_str()) {
        return Ok(path);
    }
    if args.corpus.exists() {
        std::fs::remove_dir_all(&args.corpus)?;
    }
    std::fs::create_dir_all(&dir)?;
    let mut connection = Connection::open(&path)?;
    connection.pragma_update(None, "journal_mode", "wal")?;
    connection.execute_batch(SCHEMA)?;
    let transaction = connection.transaction()?;
    for session in 0..args.sessions {
        let at = 1_700_000_000_000 + session as i64 * 1000;
        transaction.execute(
            "INSERT INTO session VALUES (?1, 'global', NULL, 's', '/src/app', 't', '1.18.33', 0,
             '{\"id\":\"claude-sonnet-4-5\",\"providerID\":\"anthropic\"}', ?2, ?2)",
            params![format!("ses_{session:06}"), at],
        )?;
        for step in 0..args.steps {
            insert_step(&transaction, session, &step.to_string(), at + step as i64)?;
        }
        for (position, (content, status)) in [
            ("Read the code", "completed"),
            ("Write the parser", "in_progress"),
            ("Tell the room", "pending"),
        ]
        .into_iter()
        .enumerate()
        {
            transaction.execute(
                "INSERT INTO todo VALUES (?1, ?2, ?3, 'medium', ?4, ?5, ?5)",
                params![
                    format!("ses_{session:06}"),
                    content,
                    status,
                    position as i64,
                    at
                ],
            )?;
        }
    }
    transaction.commit()?;
    drop(connection);
    std::fs::write(&marker, description)?;
    Ok(path)
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
    let database = build(&args)?;
    let size = std::fs::metadata(&database)?.len()
        + std::fs::metadata(database.with_extension("db-wal")).map_or(0, |m| m.len());
    println!(
        "# roundtable-bench-opencode: {} sessions of {} steps, {:.0} MB (ready in {:.1} s), {} runs",
        args.sessions,
        args.steps,
        size as f64 / 1e6,
        built.elapsed().as_secs_f64(),
        args.runs
    );
    let home = std::path::absolute(&args.corpus)?;

    // `roundtable scan`, from a fresh process each time.
    let mut times = Vec::new();
    for run in 0..args.runs {
        let started = Instant::now();
        let output = Command::new(&roundtable)
            .args(["--json", "scan"])
            .env_clear()
            .env("HOME", &home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()?;
        let elapsed = started.elapsed();
        if !output.status.success() {
            bail!("scan failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        if run == 0 {
            let scan: serde_json::Value = serde_json::from_slice(&output.stdout)?;
            let sessions = scan["sessions"].as_array().context("sessions")?;
            let input: u64 = sessions
                .iter()
                .map(|session| session["tokens"]["input"].as_u64().unwrap_or(0))
                .sum();
            ensure!(
                sessions.len() == args.sessions
                    && input == (args.sessions * args.steps) as u64 * STEP_TOKENS.0,
                "scan found {} sessions and {input} input tokens",
                sessions.len()
            );
        }
        println!("scan {}: {:.3} s", run + 1, elapsed.as_secs_f64());
        times.push(elapsed);
    }
    let first = times[0];
    let mut warm = times[1..].to_vec();
    println!(
        "scan: first {:.3} s, then median {:.3} s",
        first.as_secs_f64(),
        median(&mut warm).as_secs_f64()
    );

    // The watcher, with OpenCode's own connection writing as it does.
    let writer = Connection::open(&database)?;
    writer.busy_timeout(Duration::from_secs(5))?;
    let run = std::process::id();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    };
    let figures = watching::measure(&home, args.appends, |n| {
        Ok(insert_step(
            &writer,
            n % args.sessions,
            &format!("a{run}_{n}"),
            now(),
        )?)
    })
    .await?;
    let (median_latency, max_latency) = figures.latency();
    println!(
        "watcher: first pass over the database into a cache: {:.2} s",
        figures.first_pass.as_secs_f64()
    );
    println!(
        "# new step → in the cache, in order (ms): {}",
        figures.latencies_ms()
    );
    println!(
        "watcher: new step → in the cache, median of {}: {:.1} ms (max {:.1} ms)",
        figures.latencies.len(),
        median_latency.as_secs_f64() * 1e3,
        max_latency.as_secs_f64() * 1e3
    );
    println!(
        "watcher: restart after one more step, caught up in {:.0} ms",
        figures.restart.as_secs_f64() * 1e3
    );
    // The steps added are taken out again, so the next run starts from the same database.
    writer.execute("DELETE FROM message WHERE id LIKE 'msg_%_a%'", [])?;
    writer.execute("DELETE FROM part WHERE id LIKE 'prt_%_a%'", [])?;
    Ok(())
}
