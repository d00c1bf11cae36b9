//! The fixed-bucket latency histogram the bookie's metrics and its storage's fsync timings
//! share (a leaf module: storage records into it, metrics renders it).

use std::fmt::Write as _;
use std::time::Duration;

/// Upper bounds (seconds) of the latency buckets; `+Inf` is implied.
pub const BUCKETS: [f64; 16] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0,
];

/// A fixed-bucket latency histogram.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&mut self, d: Duration) {
        let secs = d.as_secs_f64();
        let slot = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[slot] += 1;
        self.sum += secs;
        self.count += 1;
    }

    /// Observations.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub(crate) fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, c) in self.counts.iter().enumerate() {
            cumulative += c;
            let le = BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", self.sum, self.count);
    }
}
