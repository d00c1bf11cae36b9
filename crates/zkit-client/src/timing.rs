//! The client's clocks, as `ClientCnxn.SendThread` computes them. Pure arithmetic on durations.
//!
//! - read timeout: 2/3 of the negotiated session timeout; no byte from the server for that long
//!   means the connection is dead (a stalled link, a hung server) and the client reconnects,
//!   still within the session timeout.
//! - connect timeout: the session timeout divided by the number of hosts, so that trying every
//!   host once fits in one session timeout.
//! - ping: after half the read timeout without sending anything (one second less once that is
//!   more than a second, "to prevent race condition missing to send the second ping"), and at
//!   least every 10 s.
//! - reconnect pauses: none while a round over the hosts is under way; after each full round
//!   without a session, a pause growing from 50 ms up to a quarter of the spin delay (see
//!   [`round_pause`]).

use std::time::Duration;

/// `MAX_SEND_PING_INTERVAL` in `ClientCnxn.SendThread.run`.
const MAX_SEND_PING_INTERVAL: Duration = Duration::from_secs(10);

/// `readTimeout = negotiatedSessionTimeout * 2 / 3`.
pub(crate) fn read_timeout(session_timeout: Duration) -> Duration {
    session_timeout * 2 / 3
}

/// `connectTimeout = sessionTimeout / hostProvider.size()`.
pub(crate) fn connect_timeout(session_timeout: Duration, hosts: usize) -> Duration {
    session_timeout / u32::try_from(hosts.max(1)).unwrap_or(u32::MAX)
}

/// How long the connection may go without sending before a ping is due.
///
/// Java pings when `readTimeout/2 - idleSend - (idleSend > 1000 ? 1000 : 0) <= 0`, or when
/// `idleSend > 10 s`: with `h = readTimeout/2`, that is at `h` for `h <= 1 s`, just past 1 s
/// for `h` up to 2 s, and at `h - 1 s` beyond.
pub(crate) fn ping_interval(read_timeout: Duration) -> Duration {
    let half = read_timeout / 2;
    let second = Duration::from_secs(1);
    let due = if half <= second {
        half
    } else {
        (half - second).max(second)
    };
    due.min(MAX_SEND_PING_INTERVAL)
}

/// How long to wait after a full round of hosts without a session: Apache's
/// `StaticHostProvider.next(1000)` sleeps 1 s; a session shorter than 10 s waits a tenth of it
/// instead, so that a short session (tests, fast failover) can reconnect before it expires.
pub(crate) fn spin_delay(session_timeout: Duration) -> Duration {
    (session_timeout / 10).min(Duration::from_secs(1))
}

/// The pause after the first full round of hosts without a session.
const FIRST_ROUND_PAUSE: Duration = Duration::from_millis(50);

/// The longest pause before the next connection attempt after `rounds` full rounds over the
/// hosts without a session (the caller draws the pause between half of it and all of it, so
/// that the clients a server dropped together do not come back together).
///
/// No pause within the first round: a dead or not-yet-serving member refuses at once, and the
/// next one may serve (a member killed, or a leader lost and re-elected in a few hundred ms).
/// Apache's `ClientCnxn.SendThread.startConnect` sleeps up to 1 s before *every* attempt but
/// the client's very first, which after a leader's loss costs each session a random 0–1 s on
/// top of the election, and a 2PC needing four sessions back the slowest of four draws. As
/// kazoo's `ConnectionHandler._connect_loop` does, a round goes without sleeping; between
/// rounds the pause doubles from 50 ms (kazoo: 100 ms) up to a quarter of the spin delay
/// (250 ms for sessions of 10 s or more), where it stays.
///
/// Why a quarter and not the whole spin delay: a leader election ends after a few hundred
/// milliseconds to a few seconds, and every session of the ensemble waits for it. A pause
/// grown to 1 s by then leaves a session idle for up to a second after the members serve
/// again; on a 3-member ensemble with the leader killed, the next lock hand-off came either
/// right after the first reconnect (0.6 s) or a pause later (1.2–1.4 s). At 250 ms a session
/// is back within a quarter of a second of a member serving. The cost is one round over the
/// hosts every 125–250 ms per disconnected client while no member serves, each refused
/// attempt one accept and one close on the member.
pub(crate) fn round_pause(rounds: u32, spin: Duration) -> Duration {
    if rounds == 0 {
        return Duration::ZERO;
    }
    FIRST_ROUND_PAUSE
        .saturating_mul(1u32 << (rounds - 1).min(16))
        .min(spin / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn read_and_connect_timeouts() {
        assert_eq!(read_timeout(ms(30_000)), ms(20_000));
        assert_eq!(read_timeout(ms(4_000)), Duration::from_nanos(2_666_666_666));
        assert_eq!(connect_timeout(ms(30_000), 3), ms(10_000));
        assert_eq!(connect_timeout(ms(30_000), 0), ms(30_000));
    }

    /// The Java formula, evaluated at every millisecond, against ours.
    #[test]
    fn ping_interval_matches_send_thread() {
        for read in [
            600u64, 1_333, 2_000, 2_666, 3_000, 4_000, 20_000, 26_666, 40_000,
        ] {
            let java = (0..=20_000u64)
                .find(|&idle| {
                    let extra = if idle > 1000 { 1000 } else { 0 };
                    (read / 2) as i64 - idle as i64 - extra <= 0 || idle > 10_000
                })
                .unwrap();
            let ours = ping_interval(ms(read)).as_millis() as u64;
            // Java checks `idle > 1000` on whole ms: it fires at 1001, we say 1000.
            assert!(
                ours == java || ours + 1 == java,
                "read {read}: java {java} ours {ours}"
            );
        }
    }

    #[test]
    fn spin_delay_is_a_second_at_most() {
        assert_eq!(spin_delay(ms(30_000)), ms(1000));
        assert_eq!(spin_delay(ms(4_000)), ms(400));
    }

    #[test]
    fn round_pause_is_none_in_the_first_round_then_doubles_to_a_quarter_of_the_spin_delay() {
        let spin = spin_delay(ms(10_000));
        let pauses: Vec<u64> = (0..7)
            .map(|r| round_pause(r, spin).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [0, 50, 100, 200, 250, 250, 250]);
        // A short session's spin delay caps it sooner; huge round counts do not overflow.
        assert_eq!(round_pause(3, spin_delay(ms(2_000))), ms(50));
        assert_eq!(round_pause(u32::MAX, spin), ms(250));
    }
}
