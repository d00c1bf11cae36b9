//! The live charts' data: throughput and latency per op over the last minutes, from two kinds
//! of counters, turned into one point per collection by differencing consecutive samples.
//! Pure: samples in, points out.
//!
//! - **zkit serve** (`/metrics`, Prometheus text): `zkit_requests_total{op}` and the histogram
//!   `zkit_request_latency_seconds{op}`. Per interval: requests/s per op, and p50/p99 from the
//!   bucket counts that changed in the interval (linear inside a bucket, so a percentile is as
//!   exact as the bucket bounds: 0.1 ms … 5 s).
//! - **Any ZooKeeper** (`mntr`): `cnt_/sum_readlatency` and `cnt_/sum_updatelatency` (Apache's
//!   `ServerMetrics` summaries, which zkit serves too), else `packets_received`. Apache keeps no
//!   percentiles there, so its points carry the interval's **mean** latency of reads and of
//!   updates in the p50 field and the server's running **max** (`max_latency`, since start or
//!   `srst`) in the p99 field; the page labels them so.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

/// How many points a series keeps (at one collection per second: five minutes).
pub const HISTORY: usize = 300;

/// One per-op histogram (cumulative bucket counts by upper bound in seconds) and its count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpCounters {
    /// Requests answered.
    pub count: u64,
    /// `(le, cumulative count)`, ascending `le`; `+Inf` is `f64::INFINITY`.
    pub buckets: Vec<(f64, u64)>,
}

/// Counters read at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// When (Unix ms).
    pub at_ms: i64,
    /// Per-op counters (from Prometheus text) when the server has them.
    pub ops: BTreeMap<String, OpCounters>,
    /// `mntr` counters: `(count, sum_ms)` of reads and of updates, packets received, max latency.
    pub reads: Option<(u64, u64)>,
    /// See `reads`.
    pub updates: Option<(u64, u64)>,
    /// `packets_received`.
    pub packets: Option<u64>,
    /// `max_latency` (ms).
    pub max_latency_ms: Option<f64>,
}

/// One series' value at one point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Value {
    /// Operations per second in the interval.
    pub rate: f64,
    /// p50 latency in ms (for `mntr` sources: the interval's mean).
    pub p50: Option<f64>,
    /// p99 latency in ms (for `mntr` sources: the server's running max).
    pub p99: Option<f64>,
}

/// One chart point: every series at the end of one interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// End of the interval (Unix ms).
    pub t: i64,
    /// Series by name (`getData`, `create`, …, or `reads`/`updates`/`packets`).
    pub series: BTreeMap<String, Value>,
}

/// Parses the per-op lines of zkit serve's `/metrics`.
pub fn parse_prometheus(text: &str) -> BTreeMap<String, OpCounters> {
    let mut ops: BTreeMap<String, OpCounters> = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((metric, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((name, labels)) = metric
            .split_once('{')
            .and_then(|(n, l)| Some((n, l.strip_suffix('}')?)))
        else {
            continue;
        };
        let label = |key: &str| {
            labels.split(',').find_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                (k == key).then(|| v.trim_matches('"').to_string())
            })
        };
        let Some(op) = label("op") else { continue };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        match name {
            "zkit_requests_total" => ops.entry(op).or_default().count = value as u64,
            "zkit_request_latency_seconds_bucket" => {
                let le = match label("le").as_deref() {
                    Some("+Inf") => f64::INFINITY,
                    Some(v) => match v.parse() {
                        Ok(le) => le,
                        Err(_) => continue,
                    },
                    None => continue,
                };
                ops.entry(op).or_default().buckets.push((le, value as u64));
            }
            _ => {}
        }
    }
    for c in ops.values_mut() {
        c.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    ops
}

/// The `q` quantile (0..1) in ms of the observations between two cumulative histograms
/// `before` and `after` of the same buckets; `None` when nothing was observed.
pub fn quantile_between(before: &[(f64, u64)], after: &[(f64, u64)], q: f64) -> Option<f64> {
    let delta: Vec<(f64, u64)> = after
        .iter()
        .map(|(le, n)| {
            let old = before.iter().find(|(b, _)| b == le).map_or(0, |(_, c)| *c);
            (*le, n.saturating_sub(old))
        })
        .collect();
    let total = delta.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut lower = 0.0;
    let mut below = 0u64;
    for (le, cumulative) in &delta {
        if *cumulative as f64 >= rank && *cumulative > below {
            // +Inf: all we know is "above the last bound".
            let upper = if le.is_finite() { *le } else { lower };
            let within = (rank - below as f64) / (*cumulative - below) as f64;
            return Some((lower + (upper - lower) * within.clamp(0.0, 1.0)) * 1000.0);
        }
        lower = if le.is_finite() { *le } else { lower };
        below = *cumulative;
    }
    Some(lower * 1000.0)
}

/// The point for the interval from `before` to `after`; `None` when time did not advance.
pub fn point(before: &Sample, after: &Sample) -> Option<Point> {
    let dt = (after.at_ms - before.at_ms) as f64 / 1000.0;
    if dt <= 0.0 {
        return None;
    }
    let mut series = BTreeMap::new();
    if !after.ops.is_empty() {
        for (op, now) in &after.ops {
            let old = before.ops.get(op).cloned().unwrap_or_default();
            let n = now.count.saturating_sub(old.count);
            series.insert(
                op.clone(),
                Value {
                    rate: n as f64 / dt,
                    p50: quantile_between(&old.buckets, &now.buckets, 0.5),
                    p99: quantile_between(&old.buckets, &now.buckets, 0.99),
                },
            );
        }
    } else {
        let mean = |b: Option<(u64, u64)>, a: Option<(u64, u64)>| {
            let ((c0, s0), (c1, s1)) = (b?, a?);
            let n = c1.saturating_sub(c0);
            Some(Value {
                rate: n as f64 / dt,
                p50: (n > 0).then(|| s1.saturating_sub(s0) as f64 / n as f64),
                p99: after.max_latency_ms,
            })
        };
        if let Some(v) = mean(before.reads, after.reads) {
            series.insert("reads".to_string(), v);
        }
        if let Some(v) = mean(before.updates, after.updates) {
            series.insert("updates".to_string(), v);
        }
        if series.is_empty() {
            if let (Some(p0), Some(p1)) = (before.packets, after.packets) {
                series.insert(
                    "packets".to_string(),
                    Value {
                        rate: p1.saturating_sub(p0) as f64 / dt,
                        p50: None,
                        p99: after.max_latency_ms,
                    },
                );
            }
        }
    }
    Some(Point {
        t: after.at_ms,
        series,
    })
}

/// The last [`HISTORY`] points and the sample they end at.
#[derive(Debug, Default)]
pub struct History {
    last: Option<Sample>,
    points: VecDeque<Point>,
}

impl History {
    /// Adds a sample; a point is made from it and the previous one.
    pub fn push(&mut self, sample: Sample) {
        if let Some(p) = self.last.as_ref().and_then(|last| point(last, &sample)) {
            if self.points.len() == HISTORY {
                self.points.pop_front();
            }
            self.points.push_back(p);
        }
        self.last = Some(sample);
    }

    /// The points, oldest first.
    pub fn points(&self) -> Vec<Point> {
        self.points.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP zkit_requests_total x\n\
        zkit_requests_total{op=\"getData\"} 10\n\
        zkit_request_latency_seconds_bucket{op=\"getData\",le=\"0.001\"} 8\n\
        zkit_request_latency_seconds_bucket{op=\"getData\",le=\"0.01\"} 10\n\
        zkit_request_latency_seconds_bucket{op=\"getData\",le=\"+Inf\"} 10\n\
        zkit_request_latency_seconds_sum{op=\"getData\"} 0.01\n\
        zkit_fsync_latency_seconds_bucket{le=\"0.001\"} 3\n";

    #[test]
    fn prometheus_per_op_counters() {
        let ops = parse_prometheus(TEXT);
        assert_eq!(ops.len(), 1);
        let g = &ops["getData"];
        assert_eq!(g.count, 10);
        assert_eq!(g.buckets.len(), 3);
        assert!(g.buckets[2].0.is_infinite());
    }

    #[test]
    fn quantiles_come_from_the_interval_only() {
        let before = vec![(0.001, 100), (0.01, 100), (f64::INFINITY, 100)];
        // 10 new observations, all between 1 and 10 ms: the old fast ones must not count.
        let after = vec![(0.001, 100), (0.01, 110), (f64::INFINITY, 110)];
        let p50 = quantile_between(&before, &after, 0.5).unwrap();
        assert!((1.0..=10.0).contains(&p50), "{p50}");
        assert!((p50 - 5.5).abs() < 1e-9);
        assert_eq!(quantile_between(&after, &after, 0.5), None);
    }

    #[test]
    fn points_from_prometheus_and_from_mntr() {
        let mut a = Sample {
            at_ms: 1000,
            ops: parse_prometheus(TEXT),
            ..Sample::default()
        };
        let mut b = a.clone();
        b.at_ms = 3000;
        let g = b.ops.get_mut("getData").unwrap();
        g.count = 30;
        g.buckets = vec![(0.001, 28), (0.01, 30), (f64::INFINITY, 30)];
        let p = point(&a, &b).unwrap();
        assert_eq!(p.series["getData"].rate, 10.0);
        assert!(p.series["getData"].p99.unwrap() <= 1.0);

        a.ops.clear();
        b.ops.clear();
        a.reads = Some((10, 20));
        b.reads = Some((30, 80));
        b.max_latency_ms = Some(7.0);
        let p = point(&a, &b).unwrap();
        assert_eq!(p.series["reads"].rate, 10.0);
        assert_eq!(p.series["reads"].p50, Some(3.0));
        assert_eq!(p.series["reads"].p99, Some(7.0));

        let mut h = History::default();
        for i in 0..(HISTORY + 5) {
            h.push(Sample {
                at_ms: i as i64 * 1000,
                packets: Some(i as u64),
                ..Sample::default()
            });
        }
        assert_eq!(h.points().len(), HISTORY);
    }
}
