//! The scenarios, grouped by area. Each is `async fn(Ctx) -> anyhow::Result<()>` that records
//! everything it observes through the logging client; an `Err` means the scenario could not
//! proceed (not a mismatch — mismatches are found by comparing transcripts).

pub mod bad_input;
pub mod misc;
pub mod multi;
pub mod nodes;
pub mod reaper;
pub mod sessions;
pub mod watches;
