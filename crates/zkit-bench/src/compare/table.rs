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
    Micros,
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
            Unit::Micros => format!("{v:.2} µs"),
        }
    }
}

pub(super) fn ratio(z: Option<f64>, a: Option<f64>) -> Option<f64> {
    match (z, a) {
        (Some(z), Some(a)) if a > 0.0 => Some(z / a),
        _ => None,
    }
}

/// The server's CPU time per completed operation of its `i`-th pipelined workload, in µs.
fn cpu_per_op(f: &ServerFigures, i: usize) -> Option<f64> {
    let r = f.pipelined.get(i)?;
    let cpu = (*f.pipelined_cpu.get(i)?)?;
    (r.completed > 0).then(|| cpu.as_secs_f64() * 1e6 / r.completed as f64)
}

fn p50(r: &LoadReport) -> u64 {
    r.p50_us
}

fn p99(r: &LoadReport) -> u64 {
    r.p99_us
}

pub(super) fn rows(z: &ServerFigures, a: &ServerFigures) -> Vec<Row> {
    let us = |v: u64| Some(v as f64 / 1000.0);
    let mut rows = Vec::new();
    let mut lat = |name: &str, zr: &Option<LoadReport>, ar: &Option<LoadReport>| {
        for (metric, at) in [("p50", p50 as fn(&LoadReport) -> u64), ("p99", p99)] {
            rows.push(Row {
                workload: name.into(),
                metric,
                zkit: zr.as_ref().and_then(|r| us(at(r))),
                apache: ar.as_ref().and_then(|r| us(at(r))),
                unit: Unit::Millis,
            });
        }
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
        rows.push(Row {
            workload: name.clone(),
            metric: "server CPU / op",
            zkit: cpu_per_op(z, i),
            apache: cpu_per_op(a, i),
            unit: Unit::Micros,
        });
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
        "`zkit bench lock`, 1 client".into(),
        "acquire+release",
        Unit::OpsPerSec,
        |f| f.lock.map(|l| l.rate),
    ));
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

/// Lock cycles per second one client must reach on zkit serve: a cycle costs about one round
/// trip and one fdatasync, so about 9,000/s where an fdatasync takes 0.1 ms.
const LOCK_TARGET: u32 = 5_000;

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
    for (ops, factor) in [
        (OpMix::Create, 4.0),
        (OpMix::Set, 4.0),
        (OpMix::Mixed { read_percent: 90 }, 4.0),
        (OpMix::Get, 5.0),
    ] {
        let r = ratio(tput(z, ops), tput(a, ops));
        out.push((
            format!("pipelined {ops} throughput ≥ {factor} × Apache"),
            r.map(|r| r >= factor),
            r.map_or("no Apache figure".into(), |r| format!("{r:.2} ×")),
        ));
    }
    // Tails and CPU: the worst workload decides.
    let worst = |of: &dyn Fn(&ServerFigures, usize) -> Option<f64>| {
        let mut worst: Option<(f64, String)> = None;
        for (i, zr) in z.pipelined.iter().enumerate() {
            if let Some(r) = ratio(of(z, i), of(a, i)) {
                if worst.as_ref().map_or(true, |w| r > w.0) {
                    worst = Some((r, zr.ops.to_string()));
                }
            }
        }
        worst
    };
    let p999 = worst(&|f: &ServerFigures, i| f.pipelined.get(i).map(|r| r.p999_us as f64));
    out.push((
        "p99.9 of every pipelined workload ≤ 0.5 × Apache's".into(),
        p999.as_ref().map(|w| w.0 <= 0.5),
        p999.map_or("no Apache figure".into(), |(r, ops)| {
            format!("worst {r:.2} × ({ops})")
        }),
    ));
    let cpu = worst(&cpu_per_op);
    out.push((
        "server CPU per operation ≤ 0.1 × Apache's (every pipelined workload)".into(),
        cpu.as_ref().map(|w| w.0 <= 0.1),
        cpu.map_or("no Apache figure".into(), |(r, ops)| {
            format!("worst {r:.2} × ({ops})")
        }),
    ));
    // The fixed offered load is a workload too: its p99.9 counts as the pipelined ones' do.
    let rated = |of: fn(&LoadReport) -> u64| {
        ratio(
            z.rated.as_ref().map(|r| of(r) as f64),
            a.rated.as_ref().map(|r| of(r) as f64),
        )
    };
    let (p99, p999) = (rated(|r| r.p99_us), rated(|r| r.p999_us));
    out.push((
        "p99 and p99.9 latency ≤ 0.5 × Apache's at the same offered load (mixed:90)".into(),
        p99.zip(p999).map(|(p99, p999)| p99 <= 0.5 && p999 <= 0.5),
        p99.zip(p999)
            .map_or("no Apache figure".into(), |(p99, p999)| {
                format!("p99 {p99:.2} ×, p99.9 {p999:.2} ×")
            }),
    ));
    let rss = ratio(z.nodes_rss.map(|v| v as f64), a.nodes_rss.map(|v| v as f64));
    let nodes = z.populate.map_or(0, |p| p.0);
    out.push((
        format!("RSS with {nodes} znodes ≤ 0.15 × Apache's"),
        rss.map(|r| r <= 0.15),
        rss.map_or("no Apache figure".into(), |r| format!("{r:.2} ×")),
    ));
    if let Some(lock) = &z.lock {
        out.push((
            format!("`zkit bench lock` on zkit serve, 1 client ≥ {LOCK_TARGET} cycles/s"),
            Some(lock.rate >= f64::from(LOCK_TARGET)),
            format!("{:.0} cycles/s", lock.rate),
        ));
    }
    if let (Some(w), Some(rtt)) = (&z.sync_write, &z.rtt) {
        let bound = rtt.p50_us as f64 + fdatasync.as_micros() as f64 + 50.0;
        out.push((
            "sync write p50 ≤ RTT p50 + one fdatasync p50 + 0.05 ms".into(),
            Some(w.p50_us as f64 <= bound),
            format!(
                "{} vs {} ({} + {} + 0.050 ms)",
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
    use crate::load::LockRow;

    #[test]
    fn ratios_and_targets() {
        assert_eq!(ratio(Some(4.0), Some(2.0)), Some(2.0));
        assert_eq!(ratio(Some(4.0), Some(0.0)), None);
        let report = |ops, rate, p50, p99| LoadReport {
            ops,
            sessions: 1,
            inflight: 1,
            completed: 1000,
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
        let cpu = |ms: u64| Some(Duration::from_millis(ms));
        let z = ServerFigures {
            pipelined: vec![
                report(OpMix::Create, 500.0, 1, 40),
                report(OpMix::Get, 100.0, 1, 100),
            ],
            pipelined_cpu: vec![cpu(5), cpu(30)],
            rtt: Some(report(OpMix::Exists, 1.0, 100, 100)),
            sync_write: Some(report(OpMix::Set, 1.0, 1100, 1100)),
            lock: Some(LockRow {
                clients: 1,
                cycles: 4999,
                rate: 4999.0,
                p50: Duration::from_micros(150),
                p99: Duration::from_micros(300),
            }),
            ..ServerFigures::default()
        };
        let a = ServerFigures {
            pipelined: vec![
                report(OpMix::Create, 100.0, 1, 100),
                report(OpMix::Get, 100.0, 1, 100),
            ],
            pipelined_cpu: vec![cpu(100), cpu(100)],
            ..ServerFigures::default()
        };
        let t = targets(&z, &a, Duration::from_micros(1000));
        let held = |prefix: &str| t.iter().find(|x| x.0.starts_with(prefix)).map(|x| x.1);
        assert_eq!(held("p99 and p99.9"), Some(None));
        let shown = |prefix: &str| {
            t.iter()
                .find(|x| x.0.starts_with(prefix))
                .map(|x| x.2.clone())
        };
        assert_eq!(held("pipelined create"), Some(Some(true)));
        assert_eq!(held("pipelined get"), Some(Some(false)));
        assert_eq!(held("pipelined set"), Some(None));
        // create's p99.9 is 0.4 × Apache's, get's 1.0 ×: the worst decides.
        assert_eq!(held("p99.9"), Some(Some(false)));
        assert_eq!(shown("p99.9").as_deref(), Some("worst 1.00 × (get)"));
        // CPU per op: create 0.05 ×, get 0.30 ×.
        assert_eq!(held("server CPU"), Some(Some(false)));
        assert_eq!(shown("server CPU").as_deref(), Some("worst 0.30 × (get)"));
        assert_eq!(cpu_per_op(&z, 0), Some(5.0));
        assert_eq!(cpu_per_op(&z, 2), None);
        // 1.1 ms ≤ 0.1 + 1.0 + 0.05 ms holds; 1.2 ms would not.
        assert_eq!(held("sync write"), Some(Some(true)));
        assert_eq!(held("`zkit bench lock`"), Some(Some(false)));
        assert_eq!(shown("`zkit bench lock`").as_deref(), Some("4999 cycles/s"));
        let slower = ServerFigures {
            sync_write: Some(report(OpMix::Set, 1.0, 1200, 1200)),
            lock: z.lock.map(|l| LockRow { rate: 5000.0, ..l }),
            ..z.clone()
        };
        let t = targets(&slower, &a, Duration::from_micros(1000));
        assert_eq!(
            t.iter()
                .find(|x| x.0.starts_with("`zkit bench lock`"))
                .map(|x| x.1),
            Some(Some(true))
        );
        assert_eq!(
            t.iter()
                .find(|x| x.0.starts_with("sync write"))
                .map(|x| x.1),
            Some(Some(false))
        );
    }

    #[test]
    fn fixed_load_target_counts_its_p999_too() {
        let rated = |p99_us, p999_us| ServerFigures {
            rated: Some(LoadReport {
                ops: OpMix::Mixed { read_percent: 90 },
                sessions: 64,
                inflight: 32,
                completed: 1000,
                errors: 0,
                elapsed: Duration::from_secs(1),
                ops_per_sec: 1000.0,
                p50_us: 100,
                p99_us,
                p999_us,
                max_us: p999_us,
                first_error: None,
                percentiles: Vec::new(),
            }),
            ..ServerFigures::default()
        };
        let fixed = |z: &ServerFigures, a: &ServerFigures| {
            targets(z, a, Duration::from_micros(100))
                .into_iter()
                .find(|t| t.0.starts_with("p99 and p99.9"))
                .map(|t| (t.1, t.2))
        };
        let apache = rated(1000, 2000);
        assert_eq!(
            fixed(&rated(400, 900), &apache),
            Some((Some(true), "p99 0.40 ×, p99.9 0.45 ×".into()))
        );
        // A good p99 does not hide a p99.9 over half of Apache's.
        assert_eq!(
            fixed(&rated(400, 1060), &apache),
            Some((Some(false), "p99 0.40 ×, p99.9 0.53 ×".into()))
        );
        assert_eq!(
            fixed(&rated(600, 900), &apache),
            Some((Some(false), "p99 0.60 ×, p99.9 0.45 ×".into()))
        );
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
