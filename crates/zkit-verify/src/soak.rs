//! Resource samples of the server process during a run: resident memory (`VmRSS` in
//! `/proc/PID/status`) and open file descriptors (entries of `/proc/PID/fd`), reported as
//! start / end / max so that "flat over 30 minutes" can be judged. Linux only; a restart of
//! the server (kill fault) starts a new process, so samples are grouped per process.

use std::fmt;
use std::time::Duration;

/// One sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Since the run started.
    pub at: Duration,
    /// The process sampled.
    pub pid: u32,
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// Open file descriptors.
    pub fds: u64,
}

/// Reads one sample of `pid`; `None` when it is gone.
pub fn sample(pid: u32, at: Duration) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Sample {
        at,
        pid,
        rss_kib,
        fds,
    })
}

/// Start / end / max of one series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First sample.
    pub start: u64,
    /// Last sample.
    pub end: u64,
    /// Largest sample.
    pub max: u64,
}

/// The samples of one server process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSeries {
    /// The process.
    pub pid: u32,
    /// Samples taken.
    pub samples: usize,
    /// From when to when.
    pub from: Duration,
    /// Until.
    pub to: Duration,
    /// RSS in KiB.
    pub rss_kib: Span,
    /// Open descriptors.
    pub fds: Span,
}

/// Everything sampled in a run, per server process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoakReport {
    /// One series per process, in order.
    pub series: Vec<ProcessSeries>,
}

impl SoakReport {
    /// Groups `samples` (in time order) by process.
    pub fn from_samples(samples: &[Sample]) -> SoakReport {
        let mut series: Vec<ProcessSeries> = Vec::new();
        for s in samples {
            match series.last_mut() {
                Some(p) if p.pid == s.pid => {
                    p.samples += 1;
                    p.to = s.at;
                    p.rss_kib.end = s.rss_kib;
                    p.rss_kib.max = p.rss_kib.max.max(s.rss_kib);
                    p.fds.end = s.fds;
                    p.fds.max = p.fds.max.max(s.fds);
                }
                _ => series.push(ProcessSeries {
                    pid: s.pid,
                    samples: 1,
                    from: s.at,
                    to: s.at,
                    rss_kib: Span {
                        start: s.rss_kib,
                        end: s.rss_kib,
                        max: s.rss_kib,
                    },
                    fds: Span {
                        start: s.fds,
                        end: s.fds,
                        max: s.fds,
                    },
                }),
            }
        }
        SoakReport { series }
    }
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "server resources (start / end / max):")?;
        for s in &self.series {
            writeln!(
                f,
                "  pid {} {:>5}s..{:>5}s ({} samples): RSS {} / {} / {} KiB, fds {} / {} / {}",
                s.pid,
                s.from.as_secs(),
                s.to.as_secs(),
                s.samples,
                s.rss_kib.start,
                s.rss_kib.end,
                s.rss_kib.max,
                s.fds.start,
                s.fds.end,
                s.fds.max
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_this_process_and_groups_by_pid() {
        let me = std::process::id();
        let a = sample(me, Duration::from_secs(0)).expect("own /proc entry");
        assert!(a.rss_kib > 0 && a.fds >= 3, "{a:?}");
        let b = Sample {
            at: Duration::from_secs(1),
            rss_kib: a.rss_kib + 10,
            ..a
        };
        let c = Sample {
            at: Duration::from_secs(2),
            pid: me + 1,
            ..a
        };
        let r = SoakReport::from_samples(&[a, b, c]);
        assert_eq!(r.series.len(), 2);
        assert_eq!(r.series[0].rss_kib.max, a.rss_kib + 10);
        assert_eq!(r.series[0].rss_kib.start, a.rss_kib);
        assert!(r.to_string().contains("RSS"), "{r}");
        assert_eq!(sample(u32::MAX, Duration::ZERO), None);
    }
}
