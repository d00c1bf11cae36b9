//! Differential conformance suite: every scenario runs against Apache ZooKeeper 3.8
//! (`ZKIT_APACHE_ZK=host:port`, started by `scripts/apache-zk`) and against an embedded
//! `zkit serve`; the normalized transcripts must be identical. Where zkit deliberately keeps a
//! saner answer than an Apache bug, the scenario asserts each server's own outcome with
//! `Ctx::known_difference` and says why in a comment (grep `known_difference`).
//!
//! # Layout
//! - `wire`: a raw client that sends exact bytes and reports replies, events and closes.
//! - `transcript`: normalized observations (zxid ranks, time relations, session names) and the
//!   side-by-side diff printed on mismatch.
//! - `harness`: targets, the logging client, `run(name, scenario)`.
//! - `scenarios/*`: the scenarios, one module per area (nodes, watches, multi, sessions,
//!   reaper, misc ops, bad input).
//!
//! Run: `ZKIT_APACHE_ZK=127.0.0.1:PORT cargo nextest run -p zkit-server --test conformance`.
//! Without `ZKIT_APACHE_ZK` the Apache side is skipped with a notice (mandatory when `CI` is
//! set) and each scenario still runs against zkit, which must not fail.
//!
//! `ZKIT_CONFORMANCE_APACHE_ONLY=1` (development aid) prints Apache's transcripts and skips
//! zkit, to see what the oracle does before zkit implements it. Besides the comparison, every
//! request this suite encodes and every successful reply either server sends is round-tripped
//! through `zkit-proto` (`Request::decode`/`encode_body`, `Response::decode`/`encode`); bytes
//! that do not survive are reported and fail the scenario.

mod harness;
mod scenarios;
mod transcript;
mod wire;

/// One `#[tokio::test]` per scenario, so failures name the scenario and nextest runs them in
/// parallel.
macro_rules! conformance {
    ($($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                harness::run(stringify!($name), |ctx| Box::pin(scenarios::$module::$name(ctx))).await;
            }
        )*
    };
}

conformance! {
    nodes::create_modes_and_stats,
    nodes::create_errors_in_order,
    nodes::sequential_naming,
    nodes::parent_versions_and_zxids,
    nodes::delete_paths_and_versions,
    nodes::set_data_versions,
    nodes::acl_read_and_write,
    nodes::reads_and_counts,
    nodes::special_paths,
    watches::one_shot_watches,
    watches::event_order_vs_replies,
    watches::persistent_watches,
    watches::persistent_recursive_watches,
    watches::check_and_remove_watches,
    watches::set_watches_after_reconnect,
    watches::set_watches2_after_reconnect,
    multi::multi_success,
    multi::multi_failure_positions,
    multi::multi_sequential,
    multi::multi_read_mixed,
    sessions::ephemerals_and_close_session,
    sessions::reconnect_password,
    sessions::session_expiry,
    sessions::pings_keep_a_session_alive,
    reaper::container_reaping,
    reaper::ttl_nodes,
    misc::unusual_ops,
    misc::apache_quirks,
    misc::four_letter_words,
    bad_input::malformed_frames,
    bad_input::truncated_records,
    bad_input::requests_before_handshake,
    bad_input::invalid_handshakes,
}

/// A client sending garbage must not disturb a healthy one (zkit only: it is a robustness
/// property, not a comparison).
#[tokio::test]
async fn garbage_client_beside_healthy_one() {
    scenarios::bad_input::garbage_beside_healthy().await;
}
