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

/// `mi_option_allow_thp`, mimalloc's option number (as [`MI_ARENA_EAGER_COMMIT`]); a test
/// checks it against the option's documented default (1: transparent huge pages allowed).
#[cfg(not(feature = "dhat-heap"))]
const MI_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

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

/// No transparent huge pages for this process (for `zkit serve`; call before any other
/// thread exists). mimalloc asks the kernel for them (`MADV_HUGEPAGE`) on the memory it
/// maps, so each first touch faulted in and zeroed 2 MiB at once: pipelined creates, whose
/// tree grows by hundreds of MB in seconds, spent more of the server's CPU in the kernel
/// zeroing huge pages
/// (`clear_page_erms` under `do_huge_pmd_anonymous_page`, half of the server's samples in
/// one profile) than in the server itself. This is what mimalloc does for
/// `MIMALLOC_ALLOW_THP=0`: the option, and `PR_SET_THP_DISABLE` for the process, since the
/// memory mimalloc mapped before this call was already advised. The flag is inherited by
/// child processes, so the commands that run other programs do not set it.
#[cfg(not(feature = "dhat-heap"))]
pub(crate) fn no_huge_pages() {
    // SAFETY: mi_option_set stores an option's value, before any other thread exists.
    unsafe { libmimalloc_sys::mi_option_set(MI_ALLOW_THP, 0) };
    // SAFETY: prctl(PR_SET_THP_DISABLE) only sets a flag on this process's memory. A kernel
    // without it (before 3.15) refuses it and keeps huge pages: only the speed differs.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Nothing to turn off under the heap profiler (the system allocator).
#[cfg(feature = "dhat-heap")]
pub(crate) fn no_huge_pages() {}

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
        // SAFETY: as above.
        let thp = unsafe { libmimalloc_sys::mi_option_get(super::MI_ALLOW_THP) };
        assert_eq!(
            thp,
            1,
            "mi_option_allow_thp is not option {}",
            super::MI_ALLOW_THP
        );
    }
}
