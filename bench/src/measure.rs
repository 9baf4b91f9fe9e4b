//! The workload shape, per-member counters and the report.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

#[derive(Debug, Clone, Copy)]
pub enum Workload {
    /// Every member keeps `window` sends in flight.
    Throughput,
    /// Members send open-loop at this total rate (sends/s).
    Rate(f64),
}

#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub rooms: usize,
    pub members: usize,
    pub window: usize,
    pub workload: Workload,
    pub warmup: Duration,
    pub measure: Duration,
}

impl Shape {
    /// Seconds between two sends of one member in the rate workload.
    pub fn send_interval(&self) -> Option<Duration> {
        match self.workload {
            Workload::Throughput => None,
            Workload::Rate(rate) => Some(Duration::from_secs_f64(
                (self.rooms * self.members) as f64 / rate,
            )),
        }
    }
}

/// The clock every member shares: payloads carry microseconds since `start`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub start: Instant,
    pub measure_from: Instant,
    pub measure_until: Instant,
}

impl Clock {
    pub fn new(shape: &Shape) -> Clock {
        let start = Instant::now();
        Clock {
            start,
            measure_from: start + shape.warmup,
            measure_until: start + shape.warmup + shape.measure,
        }
    }

    pub fn micros(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    pub fn measuring(&self, at: Instant) -> bool {
        at >= self.measure_from && at < self.measure_until
    }

    pub fn done(&self) -> bool {
        Instant::now() >= self.measure_until
    }
}

/// The text every send carries: who sent it and when.
pub fn payload(member: usize, micros: u64) -> String {
    format!("{member}:{micros}")
}

pub fn parse_payload(text: &str) -> Option<(usize, u64)> {
    let (member, micros) = text.split_once(':')?;
    Some((member.parse().ok()?, micros.parse().ok()?))
}

/// What one member counted during the measured period.
#[derive(Debug)]
pub struct Tally {
    pub acknowledged: u64,
    pub delivered: u64,
    /// Send→deliver latency in microseconds.
    pub latency: Histogram<u64>,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            acknowledged: 0,
            delivered: 0,
            latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
        }
    }
}

impl Tally {
    /// Records an event from `sender` sent at `sent_micros`, received now.
    pub fn delivered(&mut self, clock: &Clock, me: usize, sender: usize, sent_micros: u64) {
        let now = Instant::now();
        if sender == me || !clock.measuring(now) {
            return;
        }
        self.delivered += 1;
        let latency = clock.micros().saturating_sub(sent_micros).max(1);
        let _ = self.latency.record(latency.min(60_000_000));
    }

    pub fn acknowledged(&mut self, clock: &Clock) {
        if clock.measuring(Instant::now()) {
            self.acknowledged += 1;
        }
    }

    pub fn merge(&mut self, other: Tally) {
        self.acknowledged += other.acknowledged;
        self.delivered += other.delivered;
        self.latency.add(other.latency).expect("same bounds");
    }
}

/// CPU seconds (user + system) a process has used so far, from `/proc` (Linux).
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |index: usize| fields.get(index)?.parse::<f64>().ok();
    // utime and stime are fields 14 and 15 of the line; Linux counts them in 1/100 s.
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// Cores the server and the load generator used during the measured period.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuUse {
    pub server_cores: f64,
    pub client_cores: f64,
}

impl CpuUse {
    /// Samples the server's processes (all of them: a cluster's hubs) and this one at the
    /// start and the end of the measured period.
    pub fn sample(server_pids: Vec<u32>, clock: Clock) -> tokio::task::JoinHandle<CpuUse> {
        tokio::spawn(async move {
            if server_pids.is_empty() {
                return CpuUse::default();
            }
            let servers: Vec<String> = server_pids.iter().map(u32::to_string).collect();
            let read = || {
                let total: Option<f64> = servers.iter().map(|pid| cpu_seconds(pid)).sum();
                (total, cpu_seconds("self"))
            };
            tokio::time::sleep_until(clock.measure_from.into()).await;
            let before = read();
            let from = Instant::now();
            tokio::time::sleep_until(clock.measure_until.into()).await;
            let after = read();
            let seconds = from.elapsed().as_secs_f64();
            let cores = |before: Option<f64>, after: Option<f64>| match (before, after) {
                (Some(before), Some(after)) => (after - before) / seconds,
                _ => f64::NAN,
            };
            CpuUse {
                server_cores: cores(before.0, after.0),
                client_cores: cores(before.1, after.1),
            }
        })
    }
}

/// One workload's result.
#[derive(Debug)]
pub struct Outcome {
    pub sends_per_s: f64,
    pub delivered_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub cpu: CpuUse,
}

impl Outcome {
    pub fn from_tally(tally: &Tally, measured: std::time::Duration, cpu: CpuUse) -> Outcome {
        let seconds = measured.as_secs_f64();
        let ms = |q: f64| tally.latency.value_at_quantile(q) as f64 / 1000.0;
        Outcome {
            sends_per_s: tally.acknowledged as f64 / seconds,
            delivered_per_s: tally.delivered as f64 / seconds,
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            cpu,
        }
    }

    /// Server CPU microseconds per delivered event.
    pub fn server_us_per_event(&self) -> f64 {
        self.cpu.server_cores * 1e6 / self.delivered_per_s
    }

    pub fn line(&self) -> String {
        format!(
            "acked sends/s {:>9.0}  delivered/s {:>9.0}  p50 {:>7.2} ms  p99 {:>7.2} ms  p99.9 {:>7.2} ms  server {:.2} cores ({:.2} µs/event)  client {:.2} cores",
            self.sends_per_s,
            self.delivered_per_s,
            self.p50_ms,
            self.p99_ms,
            self.p999_ms,
            self.cpu.server_cores,
            self.server_us_per_event(),
            self.cpu.client_cores
        )
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// A markdown table of medians per target and workload, and the hub/NATS ratios.
pub fn report(results: &[(&str, &str, Outcome)]) -> String {
    let pick = |target: &str, workload: &str, field: fn(&Outcome) -> f64| {
        median(
            results
                .iter()
                .filter(|(t, w, _)| *t == target && *w == workload)
                .map(|(_, _, outcome)| field(outcome))
                .collect(),
        )
    };
    let mut out = String::from(
        "| target | workload | acked sends/s | delivered events/s | p50 ms | p99 ms | p99.9 ms | server cores | server µs/event | client cores |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for target in ["hub", "cluster", "nats"] {
        for workload in ["throughput", "latency"] {
            if !results
                .iter()
                .any(|(t, w, _)| *t == target && *w == workload)
            {
                continue;
            }
            out.push_str(&format!(
                "| {target} | {workload} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
                pick(target, workload, |o| o.sends_per_s),
                pick(target, workload, |o| o.delivered_per_s),
                pick(target, workload, |o| o.p50_ms),
                pick(target, workload, |o| o.p99_ms),
                pick(target, workload, |o| o.p999_ms),
                pick(target, workload, |o| o.cpu.server_cores),
                pick(target, workload, Outcome::server_us_per_event),
                pick(target, workload, |o| o.cpu.client_cores),
            ));
        }
    }
    let hub = pick("hub", "throughput", |o| o.delivered_per_s);
    let cluster = pick("cluster", "throughput", |o| o.delivered_per_s);
    if hub.is_finite() && cluster.is_finite() && hub > 0.0 {
        out.push_str(&format!(
            "\nMedian delivered events/s, cluster / one hub (SQLite): {:.2}x\n",
            cluster / hub
        ));
    }
    let nats = pick("nats", "throughput", |o| o.delivered_per_s);
    if hub.is_finite() && nats.is_finite() && nats > 0.0 {
        out.push_str(&format!(
            "\nMedian delivered events/s, hub / NATS JetStream: {:.2}x\n",
            hub / nats
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip() {
        assert_eq!(parse_payload(&payload(7, 123_456)), Some((7, 123_456)));
        assert_eq!(parse_payload("x"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let mut spent = 0u64;
        for i in 0..2_000_000u64 {
            spent = spent.wrapping_add(std::hint::black_box(i));
        }
        assert!(spent > 0);
        let seconds = cpu_seconds("self").expect("/proc/self/stat reads");
        assert!(seconds >= 0.0 && seconds.is_finite());
        assert_eq!(cpu_seconds("no-such-process"), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
