//! Counters for `GET /metrics`, in the Prometheus text format. Plain atomics: the hot path
//! pays one relaxed add per event.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency histograms, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            if seconds <= *bound {
                count.fetch_add(1, Ordering::Relaxed);
                break;
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(value.as_micros() as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let total = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {total}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count {total}");
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub connections: AtomicU64,
    pub connections_total: AtomicU64,
    pub events_written: AtomicU64,
    pub events_delivered: AtomicU64,
    pub commits: AtomicU64,
    pub commands: AtomicU64,
    pub refused: AtomicU64,
    pub slow_consumers: AtomicU64,
    /// TCP connections closed at once, past the hub's connection limits.
    pub connections_turned_away: AtomicU64,
    /// What the writer keeps in memory that time or a decision ends: live tokens, pending
    /// contact requests, redeemable invites, open pings (set after each batch). Each falls
    /// back once its items are final, so a steady flow of them does not grow the hub.
    pub memory_tokens: AtomicU64,
    pub memory_requests: AtomicU64,
    pub memory_invites: AtomicU64,
    pub memory_pings: AtomicU64,
    /// A2A requests that reached an agent's endpoint (past the gate).
    pub a2a_requests: AtomicU64,
    /// A2A requests the gate answered itself: 401, 403, 404, 413 or 429.
    pub a2a_turned_away: AtomicU64,
    /// A2A streams open (SendStreamingMessage, SubscribeToTask).
    pub a2a_streams: AtomicU64,
    /// MCP `wait_for_messages` calls that found nothing yet and wait for a message.
    pub mcp_waits: AtomicU64,
    /// Looks of the outbound A2A worker at the calls due to remote agents, ended.
    pub a2a_outbound_looks: AtomicU64,
    /// Calls the outbound A2A worker made to remote agents: messages sent (not the notices
    /// of a join, nor calls settled without one).
    pub a2a_outbound_calls: AtomicU64,
    pub writer_queue_latency: Histogram,
    pub commit_latency: Histogram,
    pub flush_wait_latency: Histogram,
    pub flush_latency: Histogram,
    pub delivery_latency: Histogram,
}

impl Metrics {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut counter = |name: &str, kind: &str, help: &str, value: &AtomicU64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
                value.load(Ordering::Relaxed)
            );
        };
        counter(
            "roundtable_connections",
            "gauge",
            "Open WebSocket connections.",
            &self.connections,
        );
        counter(
            "roundtable_connections_total",
            "counter",
            "WebSocket connections accepted.",
            &self.connections_total,
        );
        counter(
            "roundtable_events_written_total",
            "counter",
            "Events committed to the store.",
            &self.events_written,
        );
        counter(
            "roundtable_events_delivered_total",
            "counter",
            "Live events written to connections.",
            &self.events_delivered,
        );
        counter(
            "roundtable_commits_total",
            "counter",
            "Write transactions committed (each carries a batch of commands).",
            &self.commits,
        );
        counter(
            "roundtable_commands_total",
            "counter",
            "Commands executed by the writer.",
            &self.commands,
        );
        counter(
            "roundtable_commands_refused_total",
            "counter",
            "Commands answered with an error.",
            &self.refused,
        );
        counter(
            "roundtable_slow_consumers_total",
            "counter",
            "Connections closed with 4008 because their queue was full.",
            &self.slow_consumers,
        );
        counter(
            "roundtable_connections_turned_away_total",
            "counter",
            "TCP connections closed at once, past the connection limits (in total or per address).",
            &self.connections_turned_away,
        );
        counter(
            "roundtable_memory_tokens",
            "gauge",
            "Live tokens the writer keeps in memory (revoked ones leave it).",
            &self.memory_tokens,
        );
        counter(
            "roundtable_memory_contact_requests",
            "gauge",
            "Pending contact requests in memory (decided or expired ones leave it).",
            &self.memory_requests,
        );
        counter(
            "roundtable_memory_invites",
            "gauge",
            "Redeemable invites in memory (used up, expired or withdrawn ones leave it).",
            &self.memory_invites,
        );
        counter(
            "roundtable_memory_pings",
            "gauge",
            "Open pings in memory (answered or expired ones leave it).",
            &self.memory_pings,
        );
        counter(
            "roundtable_a2a_requests_total",
            "counter",
            "A2A requests that reached an agent's endpoint.",
            &self.a2a_requests,
        );
        counter(
            "roundtable_a2a_turned_away_total",
            "counter",
            "A2A requests refused before the endpoint (401, 403, 404, 413, 429).",
            &self.a2a_turned_away,
        );
        counter(
            "roundtable_a2a_streams",
            "gauge",
            "Open A2A streams (SendStreamingMessage, SubscribeToTask).",
            &self.a2a_streams,
        );
        counter(
            "roundtable_mcp_waits",
            "gauge",
            "MCP wait_for_messages calls waiting for a message.",
            &self.mcp_waits,
        );
        counter(
            "roundtable_a2a_outbound_looks_total",
            "counter",
            "Looks of the outbound A2A worker at the calls due to remote agents.",
            &self.a2a_outbound_looks,
        );
        counter(
            "roundtable_a2a_outbound_calls_total",
            "counter",
            "Calls made to remote agents (messages sent).",
            &self.a2a_outbound_calls,
        );
        self.writer_queue_latency.render(
            &mut out,
            "roundtable_writer_queue_seconds",
            "Time a command waits between its connection handing it over and the writer executing it.",
        );
        self.commit_latency.render(
            &mut out,
            "roundtable_commit_seconds",
            "Time to execute and commit one batch (before its flush).",
        );
        self.flush_wait_latency.render(
            &mut out,
            "roundtable_flush_wait_seconds",
            "Time from a batch's commit to the start of the flush that makes it durable.",
        );
        self.flush_latency.render(
            &mut out,
            "roundtable_flush_seconds",
            "Time to make a group of committed batches durable (one fsync).",
        );
        self.delivery_latency.render(
            &mut out,
            "roundtable_delivery_latency_seconds",
            "Time from commit to the event's frame being written to a connection.",
        );
        out
    }
}

/// One unit of a gauge, counted while this lives: what a test waits on instead of sleeping
/// ("the stream is open", "the call is waiting").
pub(crate) struct GaugeUnit {
    metrics: Arc<Metrics>,
    gauge: fn(&Metrics) -> &AtomicU64,
}

impl GaugeUnit {
    pub(crate) fn hold(metrics: Arc<Metrics>, gauge: fn(&Metrics) -> &AtomicU64) -> GaugeUnit {
        gauge(&metrics).fetch_add(1, Ordering::Relaxed);
        GaugeUnit { metrics, gauge }
    }
}

impl Drop for GaugeUnit {
    fn drop(&mut self) {
        (self.gauge)(&self.metrics).fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let metrics = Metrics::default();
        metrics.events_written.fetch_add(3, Ordering::Relaxed);
        metrics.delivery_latency.observe(Duration::from_micros(300));
        metrics.delivery_latency.observe(Duration::from_millis(30));
        let text = metrics.render();
        assert!(
            text.contains("roundtable_events_written_total 3\n"),
            "{text}"
        );
        assert!(text.contains("roundtable_delivery_latency_seconds_bucket{le=\"0.0005\"} 1\n"));
        assert!(text.contains("roundtable_delivery_latency_seconds_bucket{le=\"0.05\"} 2\n"));
        assert!(text.contains("roundtable_delivery_latency_seconds_count 2\n"));
    }
}
