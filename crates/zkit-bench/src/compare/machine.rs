//! The machine under the benchmark: the cost of one fdatasync, CPU, memory, load, Java.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::bench_common::{new_histogram, record};

/// The cost of one durable write on the data-dir disk: p50 of a 128-byte write + fdatasync.
#[derive(Debug, Clone, Copy)]
pub(super) struct FdatasyncCost {
    /// Appending (the file grows, so the size must be journaled too).
    pub(super) append: Duration,
    /// Writing sequentially into a segment pre-allocated with fallocate(2), as zkit's WAL
    /// does: the figure the sync-write target uses.
    pub(super) in_place: Duration,
}

/// Measures [`FdatasyncCost`] with `samples` writes of each kind in `dir`.
pub(super) fn fdatasync_cost(dir: &Path, samples: usize) -> Result<FdatasyncCost> {
    use std::io::{Seek as _, SeekFrom};
    std::fs::create_dir_all(dir)?;
    let path = dir.join("fdatasync-probe");
    let record_bytes = [b'x'; 128];
    let measure = |file: &mut std::fs::File| -> Result<Duration> {
        let mut h = new_histogram();
        for _ in 0..samples {
            let t0 = Instant::now();
            file.write_all(&record_bytes)?;
            file.sync_data()?;
            record(&mut h, t0.elapsed());
        }
        Ok(Duration::from_micros(h.value_at_quantile(0.5)))
    };
    let mut file = std::fs::File::create(&path)?;
    let append = measure(&mut file)?;
    drop(file);
    std::fs::remove_file(&path)?;
    let mut file = std::fs::File::create(&path)?;
    let len = ((samples + 1) * record_bytes.len()) as libc::off_t;
    {
        use std::os::fd::AsRawFd as _;
        // SAFETY: fallocate on a file descriptor we own, with a valid range.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
        if rc != 0 {
            // No fallocate here: zero-fill instead.
            file.write_all(&vec![0u8; len as usize])?;
        }
    }
    file.sync_all()?;
    file.seek(SeekFrom::Start(0))?;
    let in_place = measure(&mut file)?;
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(FdatasyncCost { append, in_place })
}

/// What [`settle_disk`] found and how long the flush took.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settled {
    /// Dirty and under-writeback page cache before the flush, in KiB (/proc/meminfo).
    pub(super) dirty_kib: u64,
    pub(super) took: Duration,
}

/// Flushes every dirty page of the file system holding `dir` (syncfs(2)) and waits for it.
///
/// Run before each server starts, so that no server is measured while the kernel writes back
/// what an earlier one (or a build) left in the page cache: a server that writes files without
/// fsync (Apache ZooKeeper's snapshots) leaves hundreds of MB dirty, and when the kernel's
/// flusher writes them back 30 s later every fdatasync of the disk waits behind them, in
/// whichever server is running then.
pub(super) fn settle_disk(dir: &Path) -> Result<Settled> {
    use std::os::fd::AsRawFd as _;
    std::fs::create_dir_all(dir)?;
    let dirty_kib = dirty_kib();
    let t0 = Instant::now();
    let handle = std::fs::File::open(dir)?;
    // SAFETY: syncfs on a file descriptor we own.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::syncfs(handle.as_raw_fd()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(Settled {
        dirty_kib,
        took: t0.elapsed(),
    })
}

/// Dirty plus under-writeback page cache, in KiB.
fn dirty_kib() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    ["Dirty:", "Writeback:"]
        .iter()
        .filter_map(|key| meminfo_kib(&meminfo, key))
        .sum()
}

/// The value of `key` (e.g. `MemTotal:`) in the text of /proc/meminfo, in KiB.
fn meminfo_kib(meminfo: &str, key: &str) -> Option<u64> {
    meminfo
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub(super) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// This machine, for the report.
pub(crate) fn machine_description() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown".to_string(), |m| m.trim().to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kb = meminfo_kib(&meminfo, "MemTotal:").unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let idle = idle_description(
        read("/sys/devices/system/cpu/cpuidle/current_driver").as_deref(),
        read("/sys/module/haltpoll/parameters/guest_halt_poll_ns").as_deref(),
    );
    format!(
        "{cpus} CPUs ({model}), {:.1} GiB RAM, Linux {}{}",
        mem_kb as f64 / (1024.0 * 1024.0),
        kernel.trim(),
        idle.map(|i| format!(", {i}")).unwrap_or_default()
    )
}

/// How an idle CPU waits, when the kernel says: its cpuidle driver and, for a virtual
/// machine's guest with the `haltpoll` driver, how long it polls before it halts. A guest that
/// halts at once (`guest_halt_poll_ns` 0) wakes a sleeping thread through the host, which
/// slows every request-reply chain (one client's lock cycles, a synchronous write), so the
/// report says so.
fn idle_description(driver: Option<&str>, halt_poll_ns: Option<&str>) -> Option<String> {
    let driver = driver.map(str::trim).filter(|d| !d.is_empty())?;
    let mut out = format!("cpuidle driver {driver}");
    if driver == "haltpoll" {
        if let Some(ns) = halt_poll_ns.map(str::trim).filter(|n| !n.is_empty()) {
            out.push_str(&format!(
                " with guest_halt_poll_ns={ns} (the kernel's default is 200000; 0 halts an idle \
                 CPU at once)"
            ));
        }
    }
    Some(out)
}

pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub(crate) fn java_version() -> String {
    std::process::Command::new("java")
        .arg("-version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stderr).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::idle_description;

    #[test]
    fn a_haltpoll_guest_reports_its_polling_time() {
        assert_eq!(
            idle_description(Some("haltpoll\n"), Some("0\n")).as_deref(),
            Some(
                "cpuidle driver haltpoll with guest_halt_poll_ns=0 (the kernel's default is \
                 200000; 0 halts an idle CPU at once)"
            )
        );
    }

    #[test]
    fn other_drivers_report_their_name_only_and_no_driver_reports_nothing() {
        assert_eq!(
            idle_description(Some("intel_idle\n"), Some("200000")).as_deref(),
            Some("cpuidle driver intel_idle")
        );
        assert_eq!(
            idle_description(Some("haltpoll"), None).as_deref(),
            Some("cpuidle driver haltpoll")
        );
        assert_eq!(idle_description(None, Some("0")), None);
        assert_eq!(idle_description(Some("  \n"), Some("0")), None);
    }
}
