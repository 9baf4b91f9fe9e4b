//! The watcher (the desktop's, `roundtable watch`'s) over a `HOME` of agent logs: its first
//! pass into a fresh cache; how long a change to a log takes to reach the cache (until the
//! cache says `Change::LocalWork`); and a restart after one more change, which reads only
//! what is new.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use roundtable_core::local_agents::Environment;
use roundtable_core::profile::{Profile, Secret};
use roundtable_core::work::pricing::Pricing;
use roundtable_core::work::watch::{WatchOptions, WatchState};
use roundtable_core::{Change, Core};

/// What [`measure`] found.
pub struct WatchFigures {
    pub first_pass: Duration,
    /// Each change to the cache, in the order made.
    pub latencies: Vec<Duration>,
    pub restart: Duration,
}

impl WatchFigures {
    /// The median change → cache latency, and the largest.
    pub fn latency(&self) -> (Duration, Duration) {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        (
            median(&mut sorted),
            sorted.last().copied().unwrap_or_default(),
        )
    }

    /// The latencies in order, in milliseconds.
    pub fn latencies_ms(&self) -> String {
        self.latencies
            .iter()
            .map(|latency| format!("{:.1}", latency.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The median of `times` (sorted in place).
pub fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Measures the watcher over the logs under `home`: `change(n)` changes a log, for `n` in
/// `0..changes` each timed to the cache, then once more (`n == changes`) while the watcher
/// is stopped, before the timed restart.
pub async fn measure(
    home: &Path,
    changes: usize,
    mut change: impl FnMut(usize) -> Result<()>,
) -> Result<WatchFigures> {
    let profiles = tempfile::tempdir()?;
    let profile = Profile::save(
        profiles.path(),
        "bench",
        "127.0.0.1:9",
        "p_bench",
        "bench",
        &Secret::new("rt_bench_not_a_real_token_000000000000"),
        None,
    )?;
    let core = Core::open(profile).await?;
    let options = WatchOptions {
        env: Environment {
            home: home.to_path_buf(),
            ..Environment::default()
        },
        profiles: profiles.path().to_path_buf(),
        pricing: Pricing::built_in(),
        share_rooms: Vec::new(),
    };
    let started = Instant::now();
    let watcher = core.watch_logs(options.clone());
    watcher
        .state
        .clone()
        .wait_for(|state| matches!(state, WatchState::Watching { .. }))
        .await?;
    let first_pass = started.elapsed();
    let mut latencies = Vec::new();
    for n in 0..changes {
        let mut changed = core.changes();
        let made = Instant::now();
        change(n)?;
        tokio::time::timeout(Duration::from_secs(30), async {
            while !matches!(changed.recv().await, Ok(Change::LocalWork)) {}
        })
        .await
        .context("the change never reached the cache")?;
        latencies.push(made.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    watcher.stop().await;
    change(changes)?;
    let restarted = Instant::now();
    let watcher = core.watch_logs(options);
    watcher
        .state
        .clone()
        .wait_for(|state| matches!(state, WatchState::Watching { .. }))
        .await?;
    let restart = restarted.elapsed();
    watcher.stop().await;
    Ok(WatchFigures {
        first_pass,
        latencies,
        restart,
    })
}
