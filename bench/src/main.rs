//! `roundtable-bench`: durable send→deliver throughput and latency for N rooms × M members on
//! loopback, against the Roundtable hub and NATS JetStream in the same run, with the same
//! workload shape and the same client process.
//!
//! Two workloads per target:
//! - throughput: every member keeps `window` sends in flight (each waits for its durable
//!   acknowledgement) for the measured period; delivered events/s counts every event a
//!   member received from another member;
//! - latency: members send open-loop at a fixed total rate; send→deliver latency is measured
//!   from the send instant written in the payload to its arrival at each other member.
//!
//! Targets alternate (hub, NATS, hub, NATS…) for `--runs` rounds; the report gives each run
//! and the medians, and the ratio of the medians.

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

mod hub_target;
mod measure;
mod nats_target;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Parser;

use crate::measure::{Outcome, Shape, Workload};

#[derive(Debug, Parser)]
#[command(
    name = "roundtable-bench",
    about = "Hub vs NATS JetStream, same workload, one run."
)]
struct Args {
    /// Rooms (NATS: one stream per room).
    #[arg(long, default_value_t = 10)]
    rooms: usize,
    /// Members per room (NATS: one durable consumer per member).
    #[arg(long, default_value_t = 4)]
    members: usize,
    /// Sends each member keeps in flight in the throughput workload.
    #[arg(long, default_value_t = 8)]
    window: usize,
    /// Total sends per second in the latency workload.
    #[arg(long, default_value_t = 5000.0)]
    rate: f64,
    /// Seconds measured per workload (after the warm-up).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Seconds of warm-up before measuring.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Rounds; each round runs every target once.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The `roundtable` binary (default: next to this one).
    #[arg(long)]
    hub_bin: Option<PathBuf>,
    /// The `nats-server` binary.
    #[arg(long, default_value = "nats-server")]
    nats_bin: PathBuf,
    /// Extra `jetstream { … }` settings for nats-server, e.g. `sync_interval: always` on
    /// versions that have it.
    #[arg(long)]
    nats_jetstream_extra: Option<String>,
    /// Run only one target: hub, cluster or nats.
    #[arg(long)]
    only: Option<String>,
    /// A PostgreSQL server (`postgresql://…/postgres`, where this user may create
    /// databases) for the `cluster` target: `--nodes` hubs sharing one database of it.
    #[arg(long)]
    postgres: Option<String>,
    /// Hub processes of the `cluster` target.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// A NATS server the `cluster` target's hubs announce their commits on (`--bus`).
    #[arg(long)]
    bus: Option<String>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let hub_bin = match &args.hub_bin {
        Some(path) => path.clone(),
        None => roundtable_testkit::roundtable_beside_this_binary()?,
    };
    let nats_version = nats_target::version(&args.nats_bin).await;
    let mut targets = Vec::new();
    for target in ["hub", "cluster", "nats"] {
        let wanted = args.only.as_deref().is_none_or(|only| only == target);
        if wanted && (target != "cluster" || args.postgres.is_some()) {
            targets.push(target);
        }
    }
    let shape = |workload| Shape {
        rooms: args.rooms,
        members: args.members,
        window: args.window,
        workload,
        warmup: Duration::from_secs(args.warmup),
        measure: Duration::from_secs(args.seconds),
    };
    println!(
        "# roundtable-bench: {} rooms x {} members, window {}, latency at {} sends/s, {} s measured after {} s warm-up, {} runs",
        args.rooms, args.members, args.window, args.rate, args.seconds, args.warmup, args.runs
    );
    println!("# nats-server: {nats_version}");
    let mut results: Vec<(&str, &str, Outcome)> = Vec::new();
    for run in 1..=args.runs {
        for target in &targets {
            for (name, workload) in [
                ("throughput", Workload::Throughput),
                ("latency", Workload::Rate(args.rate)),
            ] {
                let outcome = match *target {
                    "hub" => {
                        hub_target::run(&hub_bin, shape(workload), &hub_target::Store::Sqlite)
                            .await?
                    }
                    "cluster" => {
                        let store = hub_target::Store::Cluster {
                            postgres: args.postgres.clone().unwrap_or_default(),
                            nodes: args.nodes,
                            bus: args.bus.clone(),
                        };
                        hub_target::run(&hub_bin, shape(workload), &store).await?
                    }
                    _ => {
                        nats_target::run(
                            &args.nats_bin,
                            args.nats_jetstream_extra.as_deref(),
                            shape(workload),
                        )
                        .await?
                    }
                };
                println!("run {run} {target:<4} {name:<10} {}", outcome.line());
                results.push((target, name, outcome));
            }
        }
    }
    println!();
    println!("{}", measure::report(&results));
    Ok(())
}
