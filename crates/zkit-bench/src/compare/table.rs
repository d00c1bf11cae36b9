//! The side-by-side table: one row per figure with its ratio, and which targets held.

use std::fmt::Write as _;
use std::time::Duration;

use super::figures::ServerFigures;
use super::machine::mib;
use crate::load::{ms, LoadReport, OpMix};

/// One table row: a figure of each server and how they compare.
pub(super) struct Row {
    pub(super) workload: String,
    pub(super) metric: &'static str,
    pub(super) zkit: Option<f64>,
    pub(super) apache: Option<f64>,
    pub(super) unit: Unit,
}

#[derive(Clone, Copy)]
pub(super) enum Unit {
    OpsPerSec,
    Millis,
    Bytes,
    Percent,
    Count,
    Seconds,
}

impl Unit {
    fn show(self, v: Option<f64>) -> String {
        let Some(v) = v else { return "–".into() };
        match self {
            Unit::OpsPerSec => format!("{v:.0}/s"),
            Unit::Millis => format!("{v:.3} ms"),
            Unit::Bytes => mib(v as u64),
            Unit::Percent => format!("{v:.1} %"),
            Unit::Count => format!("{v:.0}"),
            Unit::Seconds => format!("{v:.2} s"),
        }
    }
}

pub(super) fn ratio(z: Option<f64>, a: Option<f64>) -> Option<f64> {
    match (z, a) {
        (Some(z), Some(a)) if a > 0.0 => Some(z / a),
        _ => None,
    }
}

pub(super) fn rows(z: &ServerFigures, a: &ServerFigures) -> Vec<Row> {
    let us = |v: u64| Some(v as f64 / 1000.0);
    let mut rows = Vec::new();
    let mut lat = |name: &str, zr: &Option<LoadReport>, ar: &Option<LoadReport>| {
        rows.push(Row {
            workload: name.into(),
            metric: "p50",
            zkit: zr.as_ref().and_then(|r| us(r.p50_us)),
            apache: ar.as_ref().and_then(|r| us(r.p50_us)),
            unit: Unit::Millis,
        });
        rows.push(Row {
            workload: name.into(),
            metric: "p99",
            zkit: zr.as_ref().and_then(|r| us(r.p99_us)),
            apache: ar.as_ref().and_then(|r| us(r.p99_us)),
            unit: Unit::Millis,
        });
    };
    lat("sync exists (RTT), 1 session", &z.rtt, &a.rtt);
    lat("sync set, 1 session", &z.sync_write, &a.sync_write);
    lat("sync get, 1 session", &z.sync_read, &a.sync_read);
    for (i, zr) in z.pipelined.iter().enumerate() {
        let ar = a.pipelined.get(i);
        let name = format!("pipelined {} ({}×{})", zr.ops, zr.sessions, zr.inflight);
        rows.push(Row {
            workload: name.clone(),
            metric: "throughput",
            zkit: Some(zr.ops_per_sec),
            apache: ar.map(|r| r.ops_per_sec),
            unit: Unit::OpsPerSec,
        });
        for (metric, f) in [
            ("p50", (|r: &LoadReport| r.p50_us) as fn(&LoadReport) -> u64),
            ("p99", |r: &LoadReport| r.p99_us),
            ("p99.9", |r: &LoadReport| r.p999_us),
        ] {
            rows.push(Row {
                workload: name.clone(),
                metric,
                zkit: us(f(zr)),
                apache: ar.and_then(|r| us(f(r))),
                unit: Unit::Millis,
            });
        }
    }
    // A figure read the same way from each server's figures.
    let both = |workload: String, metric, unit, of: fn(&ServerFigures) -> Option<f64>| Row {
        workload,
        metric,
        zkit: of(z),
        apache: of(a),
        unit,
    };
    rows.push(both(
        "after the above".into(),
        "server CPU time",
        Unit::Seconds,
        |f| f.phase1_cpu.map(|d| d.as_secs_f64()),
    ));
    rows.push(both("after the above".into(), "RSS", Unit::Bytes, |f| {
        f.phase1_rss.map(|v| v as f64)
    }));
    if let Some(zr) = &z.rated {
        let name = format!(
            "mixed:90 at a fixed {}/s offered ({}×{})",
            z.offered_rate.unwrap_or(0),
            zr.sessions,
            zr.inflight
        );
        for (metric, zv, av) in [
            ("p50", zr.p50_us, a.rated.as_ref().map(|r| r.p50_us)),
            ("p99", zr.p99_us, a.rated.as_ref().map(|r| r.p99_us)),
            ("p99.9", zr.p999_us, a.rated.as_ref().map(|r| r.p999_us)),
        ] {
            rows.push(Row {
                workload: name.clone(),
                metric,
                zkit: us(zv),
                apache: av.and_then(us),
                unit: Unit::Millis,
            });
        }
    }
    let nodes = z.populate.map_or(0, |p| p.0);
    rows.push(both(
        format!("populate {nodes} znodes"),
        "create rate",
        Unit::OpsPerSec,
        |f| f.populate.map(|(n, d)| n as f64 / d.as_secs_f64()),
    ));
    rows.push(both(format!("{nodes} znodes"), "RSS", Unit::Bytes, |f| {
        f.nodes_rss.map(|v| v as f64)
    }));
    rows.push(both(
        format!("{nodes} znodes"),
        "data dir",
        Unit::Bytes,
        |f| f.nodes_disk.map(|v| v as f64),
    ));
    rows.push(both(
        "+ idle sessions with a watch each".into(),
        "RSS",
        Unit::Bytes,
        |f| f.idle_rss.map(|v| v as f64),
    ));
    rows.push(both(
        "+ idle sessions with a watch each".into(),
        "server CPU (pings)",
        Unit::Percent,
        |f| f.idle_cpu_percent,
    ));
    rows.push(both(
        "watch storm (1 write)".into(),
        "all delivered",
        Unit::Millis,
        |f| f.storm.map(|d| d.as_secs_f64() * 1000.0),
    ));
    rows.push(both(
        "watch storm (1 write)".into(),
        "events delivered",
        Unit::Count,
        |f| f.storm_delivered.map(|n| n as f64),
    ));
    rows.push(both("at the end".into(), "data dir", Unit::Bytes, |f| {
        f.final_disk.map(|v| v as f64)
    }));
    rows
}

pub(super) fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| workload | metric | zkit | Apache ZooKeeper | zkit / Apache |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            r.workload,
            r.metric,
            r.unit.show(r.zkit),
            r.unit.show(r.apache),
            ratio(r.zkit, r.apache).map_or("–".into(), |x| format!("{x:.2}"))
        );
    }
    out
}

/// The performance targets: (description, held?, the figures behind it).
pub(super) fn targets(
    z: &ServerFigures,
    a: &ServerFigures,
    fdatasync: Duration,
) -> Vec<(String, Option<bool>, String)> {
    let mut out = Vec::new();
    let tput = |f: &ServerFigures, ops: OpMix| {
        f.pipelined
            .iter()
            .find(|r| r.ops == ops)
            .map(|r| r.ops_per_sec)
    };
    for (ops, what) in [
        (
            OpMix::Create,
            "pipelined write (create) throughput ≥ 2 × Apache",
        ),
        (OpMix::Set, "pipelined write (set) throughput ≥ 2 × Apache"),
        (OpMix::Get, "pipelined read (get) throughput ≥ 2 × Apache"),
    ] {
        let r = ratio(tput(z, ops), tput(a, ops));
        out.push((
            what.to_string(),
            r.map(|r| r >= 2.0),
            r.map_or("no Apache figure".into(), |r| format!("{r:.2} ×")),
        ));
    }
    let p99 = ratio(
        z.rated.as_ref().map(|r| r.p99_us as f64),
        a.rated.as_ref().map(|r| r.p99_us as f64),
    );
    out.push((
        "p99 latency ≤ 0.5 × Apache's at the same offered load (mixed:90)".into(),
        p99.map(|r| r <= 0.5),
        p99.map_or("no Apache figure".into(), |r| format!("{r:.2} ×")),
    ));
    let rss = ratio(z.nodes_rss.map(|v| v as f64), a.nodes_rss.map(|v| v as f64));
    let nodes = z.populate.map_or(0, |p| p.0);
    out.push((
        format!("RSS with {nodes} znodes ≤ 0.25 × Apache's"),
        rss.map(|r| r <= 0.25),
        rss.map_or("no Apache figure".into(), |r| format!("{r:.2} ×")),
    ));
    if let (Some(w), Some(rtt)) = (&z.sync_write, &z.rtt) {
        let bound = rtt.p50_us as f64 + fdatasync.as_micros() as f64 + 200.0;
        out.push((
            "sync write p50 ≤ RTT p50 + one fdatasync p50 + 0.2 ms".into(),
            Some(w.p50_us as f64 <= bound),
            format!(
                "{} vs {} ({} + {} + 0.200 ms)",
                ms(w.p50_us),
                ms(bound as u64),
                ms(rtt.p50_us),
                ms(fdatasync.as_micros() as u64)
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_targets() {
        assert_eq!(ratio(Some(4.0), Some(2.0)), Some(2.0));
        assert_eq!(ratio(Some(4.0), Some(0.0)), None);
        let report = |ops, rate, p50, p99| LoadReport {
            ops,
            sessions: 1,
            inflight: 1,
            completed: 1,
            errors: 0,
            elapsed: Duration::from_secs(1),
            ops_per_sec: rate,
            p50_us: p50,
            p99_us: p99,
            p999_us: p99,
            max_us: p99,
            first_error: None,
            percentiles: Vec::new(),
        };
        let z = ServerFigures {
            pipelined: vec![
                report(OpMix::Create, 300.0, 1, 1),
                report(OpMix::Get, 100.0, 1, 1),
            ],
            rtt: Some(report(OpMix::Exists, 1.0, 100, 100)),
            sync_write: Some(report(OpMix::Set, 1.0, 1400, 1400)),
            ..ServerFigures::default()
        };
        let a = ServerFigures {
            pipelined: vec![
                report(OpMix::Create, 100.0, 1, 1),
                report(OpMix::Get, 100.0, 1, 1),
            ],
            ..ServerFigures::default()
        };
        let t = targets(&z, &a, Duration::from_micros(1000));
        let held = |prefix: &str| t.iter().find(|x| x.0.starts_with(prefix)).map(|x| x.1);
        assert_eq!(held("pipelined write (create)"), Some(Some(true)));
        assert_eq!(held("pipelined read"), Some(Some(false)));
        assert_eq!(held("pipelined write (set)"), Some(None));
        // 1.4 ms ≤ 0.1 + 1.0 + 0.2 ms fails by 0.1 ms.
        assert_eq!(held("sync write"), Some(Some(false)));
    }

    #[test]
    fn table_shows_missing_figures_as_dashes() {
        let rows = vec![Row {
            workload: "w".into(),
            metric: "m",
            zkit: Some(2048.0 * 1024.0),
            apache: None,
            unit: Unit::Bytes,
        }];
        assert!(table(&rows).contains("| w | m | 2.0 MiB | – | – |"));
    }
}
