//! Heap profiling of `zkit serve` (the `dhat-heap` feature, for scripts/profile-server): every
//! allocation goes through [`dhat::Alloc`], which counts it; SIGUSR1 prints the running totals
//! to stderr as one line, so a script can read the allocations a workload made (the difference
//! between two signals) without counting start-up or the snapshot written at shutdown. When the
//! server stops, dhat writes the per-call-site profile to `dhat-heap.json` (or `$ZKIT_DHAT_FILE`),
//! viewable with dhat's viewer (`dh_view.html`).

use tokio::signal::unix::{signal, SignalKind};

/// Starts the profiler; it writes its file when dropped.
pub fn start() -> dhat::Profiler {
    let file = std::env::var_os("ZKIT_DHAT_FILE").unwrap_or_else(|| "dhat-heap.json".into());
    dhat::Profiler::builder().file_name(file).build()
}

/// Prints `dhat-stats: …` (totals since start, and what is live now) on every SIGUSR1.
pub fn print_on_sigusr1() {
    tokio::spawn(async {
        let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
            eprintln!("dhat-stats: cannot listen for SIGUSR1");
            return;
        };
        while usr1.recv().await.is_some() {
            let stats = dhat::HeapStats::get();
            eprintln!(
                "dhat-stats: total_blocks={} total_bytes={} curr_blocks={} curr_bytes={} max_bytes={}",
                stats.total_blocks,
                stats.total_bytes,
                stats.curr_blocks,
                stats.curr_bytes,
                stats.max_bytes
            );
        }
    });
}
