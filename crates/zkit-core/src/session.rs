//! Sessions (Apache's `SessionTrackerImpl`): ids, passwords, negotiated timeouts and expiry
//! deadlines on tick boundaries.
//!
//! The session table itself is state changed only by `apply` (createSession/closeSession
//! txns); the deadlines are runtime bookkeeping refreshed by every request.

/// `SessionTrackerImpl.initializeNextSessionId`: the first session id of a server started at
/// `now` (ms) with id `server_id`. The top byte is the server id, the next 40 bits the time.
pub fn initial_session_id(now: i64, server_id: u8) -> i64 {
    // Java: (currentElapsedTime() << 24) >>> 8, then | (sid << 56).
    let mut next = (((now << 24) as u64) >> 8) as i64;
    next |= i64::from(server_id) << 56;
    if next == crate::tree::CONTAINER_OWNER {
        next += 1;
    }
    next
}

/// `ExpiryQueue.roundToNextInterval`: the next multiple of `interval` strictly after `time`.
pub fn round_to_next_interval(time: i64, interval: i64) -> i64 {
    let interval = interval.max(1);
    (time.div_euclid(interval) + 1).saturating_mul(interval)
}

/// One live session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Timeout (ms) it was created with.
    pub timeout_ms: i32,
    /// Its password.
    pub passwd: Vec<u8>,
    /// When it expires (ms, on a tick boundary); `None` until first touched after creation
    /// or recovery.
    pub deadline: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_id_layout() {
        let id = initial_session_id(0x0123_4567_89ab, 1);
        assert_eq!(id >> 56, 1);
        assert_eq!((id >> 16) & 0xff_ffff_ffff, 0x23_4567_89ab);
        assert_eq!(id & 0xffff, 0);
        assert!(initial_session_id(1_700_000_000_000, 0) > 0);
    }

    #[test]
    fn rounding() {
        assert_eq!(round_to_next_interval(0, 2000), 2000);
        assert_eq!(round_to_next_interval(1999, 2000), 2000);
        assert_eq!(round_to_next_interval(2000, 2000), 4000);
        assert_eq!(round_to_next_interval(5, 0), 6);
    }
}
