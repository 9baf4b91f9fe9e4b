//! Two ways of doing one thing measured in the same runs, as the round-trip benches do (an
//! A2A call against the WebSocket, an agent over ACP against its plain CLI): each run's
//! median and p99 per way, said as they come, and the median of each way's medians.

use hdrhistogram::Histogram;

/// Microseconds as milliseconds.
pub fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// Each run's median, by way.
#[derive(Debug, Default)]
pub struct RunMedians {
    medians: Vec<(String, f64)>,
}

impl RunMedians {
    /// Records run `run` of `way` and prints its median and p99 in milliseconds, with
    /// `decimals` digits.
    pub fn record(&mut self, run: usize, way: &str, latencies: &Histogram<u64>, decimals: usize) {
        let (p50, p99) = (
            ms(latencies.value_at_quantile(0.5)),
            ms(latencies.value_at_quantile(0.99)),
        );
        println!("run {run} {way:<9} median {p50:.decimals$} ms  p99 {p99:.decimals$} ms");
        self.medians.push((way.to_owned(), p50));
    }

    /// The median of `way`'s run medians (0 when it never ran).
    pub fn of(&self, way: &str) -> f64 {
        let mut values: Vec<f64> = self
            .medians
            .iter()
            .filter(|(w, _)| w == way)
            .map(|(_, m)| *m)
            .collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(0.0)
    }
}
