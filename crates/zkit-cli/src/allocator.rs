//! The process's allocator: mimalloc, tuned for the server's memory (or dhat's counting
//! allocator in a `dhat-heap` build), and the calls that steer it.

#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// mimalloc: size classes without a per-allocation header (a 100-byte znode's record takes
/// 160 bytes instead of glibc's 176) and thread-local free lists, which the server's
/// request path (a handful of short-lived buffers per request) spends less time in than in
/// glibc's malloc.
#[cfg(not(feature = "dhat-heap"))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit`, mimalloc's option number (in the `mi_option_e` of the
/// `mimalloc.h` that libmimalloc-sys builds); a test checks it against the option's
/// documented default (2: eager where the OS overcommits).
#[cfg(not(feature = "dhat-heap"))]
const MI_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Arenas are committed as they are used, not eagerly: with mimalloc's defaults
/// `zkit serve` holding 1,000,000 znodes had 289 MB of RSS against glibc's 256 MB; with eager
/// commit off, 275 MB. (Purging freed memory at once as well took it to 266 MB, but cost
/// setData throughput in an A/B, so purges keep mimalloc's delay.) Call before any other
/// thread exists.
#[cfg(not(feature = "dhat-heap"))]
pub(crate) fn tune() {
    // SAFETY: mi_option_set stores an option's value; it is called before any other thread
    // exists, and the option only steers when arena memory is committed.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_ARENA_EAGER_COMMIT, 0);
    }
}

/// Nothing to tune under the heap profiler (the system allocator).
#[cfg(feature = "dhat-heap")]
pub(crate) fn tune() {}

/// Gives the memory the allocator holds free back to the operating system (mimalloc's
/// `mi_collect(true)`).
#[cfg(not(feature = "dhat-heap"))]
pub(crate) fn return_free_memory() {
    // SAFETY: mi_collect only frees what mimalloc holds unused; any thread may call it.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// Nothing to give back under the heap profiler (the system allocator).
#[cfg(feature = "dhat-heap")]
pub(crate) fn return_free_memory() {}

#[cfg(test)]
mod tests {
    /// The option number names the option it means: its documented default is what mimalloc
    /// reports for it (`tune` does not run in a test).
    #[cfg(not(feature = "dhat-heap"))]
    #[test]
    fn mimalloc_option_number_matches_its_default() {
        // SAFETY: mi_option_get only reads an option.
        let eager = unsafe { libmimalloc_sys::mi_option_get(super::MI_ARENA_EAGER_COMMIT) };
        assert_eq!(eager, 2);
    }
}
