//! kazoo's non-blocking leases (`kazoo/recipe/lease.py`): [`NonBlockingLease`] (one holder at a
//! time for a duration, renewable by the same identifier, never waited for) and
//! [`MultiNonBlockingLease`] (at most `count` holders).
//!
//! The layout and data are kazoo's, so Python and zkit processes share leases:
//! - `path/lease_holder`: a persistent node holding kazoo's JSON, written as Python's
//!   `json.dumps` writes it: `{"version": 1, "holder": "<identifier>", "end":
//!   "2024-05-01T12:30:00"}` — `end` is naive UTC (`%Y-%m-%dT%H:%M:%S`, whole seconds).
//! - The check-and-take runs under kazoo's `Lock` on `path` (zkit's [`super::KazooLock`], whose
//!   nodes kazoo recognises), as kazoo's `_attempt_obtaining` does: if a holder node exists with
//!   another `version`, nobody takes it (kazoo: "we need an upgrade"); if it names another
//!   holder whose end is still in the future, it is not obtained; otherwise the holder node is
//!   replaced with ours, ending `now + duration`. zkit replaces it in one transaction (delete
//!   with the read version, create); kazoo deletes and creates in two steps, both under the lock.
//! - [`MultiNonBlockingLease`] tries `path/0`, `path/1`, … `path/<count-1>` in order.
//!
//! As in kazoo, the lease uses the *clients'* clocks: it is only as exclusive as they are
//! synchronised. Nothing is released: a lease ends when its time is up (renew it by obtaining
//! it again with the same identifier). The decision is the pure [`decide`]; times are
//! arguments ([`NonBlockingLease::obtain_at`]), so it is tested without waiting.
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use std::time::Duration;
//! use zkit::lock::NonBlockingLease;
//! let hour = Duration::from_secs(70 * 60);
//! if NonBlockingLease::obtain(&session, "/db_leases/hourly_cleanup", hour, "cleanup on host-7").await? {
//!     // ... this host runs the job ...
//! }
//! # Ok(()) }
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zkit_client as zk;

use super::kazoo::KazooLock;
use crate::error::{Error, Result};
use crate::protected::join;
use crate::session::Session;

/// kazoo's `NonBlockingLease._version`: the storage format version.
pub const LEASE_VERSION: i64 = 1;
/// The holder node's name under the lease path.
pub const LEASE_HOLDER: &str = "lease_holder";

/// The content of a holder node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseData {
    /// Storage format version (kazoo writes 1).
    pub version: i64,
    /// The holder's identifier.
    pub holder: String,
    /// The end of the lease, as kazoo writes it (naive UTC, `%Y-%m-%dT%H:%M:%S`).
    pub end: String,
}

impl LeaseData {
    /// The end as a time (`None` if it does not parse).
    pub fn end_time(&self) -> Option<SystemTime> {
        parse_utc(&self.end)
    }

    /// Python's `json.dumps` of kazoo's dict, byte for byte (key order `version`, `holder`,
    /// `end`; `", "` and `": "` separators; non-ASCII escaped as `\uXXXX`).
    pub fn encode(&self) -> Vec<u8> {
        format!(
            "{{\"version\": {}, \"holder\": {}, \"end\": {}}}",
            self.version,
            python_json_string(&self.holder),
            python_json_string(&self.end)
        )
        .into_bytes()
    }

    /// Reads kazoo's JSON (any spacing or key order).
    ///
    /// # Errors
    /// [`Error::Unexpected`] for bytes that are not such a JSON object.
    pub fn decode(bytes: &[u8]) -> Result<LeaseData> {
        #[derive(serde::Deserialize)]
        struct Raw {
            version: i64,
            holder: String,
            end: String,
        }
        let raw: Raw = serde_json::from_slice(bytes)
            .map_err(|e| Error::Unexpected(format!("not a kazoo lease: {e}")))?;
        Ok(LeaseData {
            version: raw.version,
            holder: raw.holder,
            end: raw.end,
        })
    }
}

/// A JSON string literal as Python's `json.dumps` writes it (`ensure_ascii=True`).
fn python_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            // Python escapes control characters below 0x20 and everything beyond ASCII.
            c if c.is_ascii() && u32::from(c) >= 0x20 => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// kazoo's lease-end format, `%Y-%m-%dT%H:%M:%S`: a naive datetime, read as UTC.
const KAZOO_TIME: &[time::format_description::BorrowedFormatItem<'_>] =
    time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");

/// `time` as kazoo's `strftime("%Y-%m-%dT%H:%M:%S")` of a naive UTC datetime (sub-second part
/// dropped; times before 1970 are written as 1970-01-01T00:00:00, times after 9999 as
/// 9999-12-31T23:59:59).
pub fn format_utc(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let at = time::OffsetDateTime::from_unix_timestamp(secs)
        .unwrap_or(time::PrimitiveDateTime::MAX.assume_utc());
    at.format(KAZOO_TIME)
        .unwrap_or_else(|_| "9999-12-31T23:59:59".to_owned())
}

/// Parses kazoo's `%Y-%m-%dT%H:%M:%S` (naive UTC), as Python's `datetime.strptime` does: a
/// date or time that does not exist (February 30, second 60) is not that format either.
/// `None` when it is not that format, or before 1970.
pub fn parse_utc(text: &str) -> Option<SystemTime> {
    let at = time::PrimitiveDateTime::parse(text, KAZOO_TIME)
        .ok()?
        .assume_utc();
    let secs = u64::try_from(at.unix_timestamp()).ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// The outcome of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseDecision {
    /// Take (or renew) the lease: write this holder node.
    Take(LeaseData),
    /// Someone else holds it until its end.
    Held,
    /// The holder node has another format version: leave it (kazoo waits for an upgrade).
    OtherVersion,
}

/// Decides, under the lock, from the current holder node (`None`: none), whether `identifier`
/// gets the lease for `duration` at `now` (kazoo's `_attempt_obtaining`). An end that does not
/// parse counts as expired.
pub fn decide(
    current: Option<&LeaseData>,
    identifier: &str,
    duration: Duration,
    now: SystemTime,
) -> LeaseDecision {
    if let Some(current) = current {
        if current.version != LEASE_VERSION {
            return LeaseDecision::OtherVersion;
        }
        // kazoo compares the naive datetimes: now (with microseconds) < end (whole seconds).
        let running = current.end_time().is_some_and(|end| now < end);
        if current.holder != identifier && running {
            return LeaseDecision::Held;
        }
    }
    LeaseDecision::Take(LeaseData {
        version: LEASE_VERSION,
        holder: identifier.to_string(),
        end: format_utc(now + duration),
    })
}

/// kazoo's `NonBlockingLease`. See the module docs.
#[derive(Debug, Clone, Copy)]
pub struct NonBlockingLease;

impl NonBlockingLease {
    /// Tries to obtain (or renew) the lease at `path` for `duration` as `identifier`, by the
    /// local clock. `Ok(true)`: obtained.
    ///
    /// # Errors
    /// ZooKeeper errors; [`Error::Unexpected`] when the holder node is not kazoo's JSON.
    pub async fn obtain(
        session: &Session,
        path: &str,
        duration: Duration,
        identifier: &str,
    ) -> Result<bool> {
        NonBlockingLease::obtain_at(session, path, duration, identifier, SystemTime::now).await
    }

    /// [`NonBlockingLease::obtain`] with a clock (kazoo's `utcnow` argument), read once the
    /// lock is held.
    ///
    /// # Errors
    /// As [`NonBlockingLease::obtain`].
    pub async fn obtain_at(
        session: &Session,
        path: &str,
        duration: Duration,
        identifier: &str,
        now: impl FnOnce() -> SystemTime,
    ) -> Result<bool> {
        let path = crate::config::resolve_key("/", path)?;
        let lock = KazooLock::new(session, &path, identifier);
        let guard = lock.lock().await?;
        let result = take_under_lock(session, &path, duration, identifier, now()).await;
        let released = guard.release().await;
        let obtained = result?;
        released?;
        Ok(obtained)
    }

    /// The current holder node of the lease at `path`, if any.
    ///
    /// # Errors
    /// ZooKeeper errors; [`Error::Unexpected`] when it is not kazoo's JSON.
    pub async fn holder(session: &Session, path: &str) -> Result<Option<LeaseData>> {
        match session.client().get_data(&join(path, LEASE_HOLDER)).await {
            Ok((data, _)) => LeaseData::decode(&data).map(Some),
            Err(zk::Error::NoNode) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }
}

async fn take_under_lock(
    session: &Session,
    path: &str,
    duration: Duration,
    identifier: &str,
    now: SystemTime,
) -> Result<bool> {
    let client = session.client();
    let holder_path = join(path, LEASE_HOLDER);
    let current = match client.get_data(&holder_path).await {
        Ok((data, stat)) => Some((LeaseData::decode(&data)?, stat.version)),
        Err(zk::Error::NoNode) => None,
        Err(err) => return Err(err.into()),
    };
    let LeaseDecision::Take(ours) =
        decide(current.as_ref().map(|(d, _)| d), identifier, duration, now)
    else {
        return Ok(false);
    };
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    match current {
        None => match client.create(&holder_path, &ours.encode(), &options).await {
            Ok(_) => Ok(true),
            // Only a writer outside the lock could race us: kazoo's clients all take it.
            Err(zk::Error::NodeExists) => Ok(false),
            Err(err) => Err(err.into()),
        },
        Some((_, version)) => {
            let mut multi = client.new_multi_writer();
            multi.add_delete(&holder_path, Some(version))?;
            multi.add_create(&holder_path, &ours.encode(), &options)?;
            match multi.commit().await {
                Ok(_) => Ok(true),
                Err(err) => match zk::Error::from(err) {
                    zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists => Ok(false),
                    other => Err(other.into()),
                },
            }
        }
    }
}

/// kazoo's `MultiNonBlockingLease`: at most `count` holders, as the leases `path/0` …
/// `path/<count-1>`.
#[derive(Debug, Clone, Copy)]
pub struct MultiNonBlockingLease;

impl MultiNonBlockingLease {
    /// Tries the leases in order; returns the slot obtained, if any.
    ///
    /// # Errors
    /// As [`NonBlockingLease::obtain`].
    pub async fn obtain(
        session: &Session,
        count: usize,
        path: &str,
        duration: Duration,
        identifier: &str,
    ) -> Result<Option<usize>> {
        MultiNonBlockingLease::obtain_at(
            session,
            count,
            path,
            duration,
            identifier,
            SystemTime::now,
        )
        .await
    }

    /// [`MultiNonBlockingLease::obtain`] with a clock.
    ///
    /// # Errors
    /// As [`NonBlockingLease::obtain`].
    pub async fn obtain_at(
        session: &Session,
        count: usize,
        path: &str,
        duration: Duration,
        identifier: &str,
        now: impl Fn() -> SystemTime,
    ) -> Result<Option<usize>> {
        for slot in 0..count {
            let slot_path = format!("{}/{slot}", path.trim_end_matches('/'));
            if NonBlockingLease::obtain_at(session, &slot_path, duration, identifier, &now).await? {
                return Ok(Some(slot));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn kazoos_time_format_both_ways() {
        assert_eq!(format_utc(at(0)), "1970-01-01T00:00:00");
        // 2024-02-29T12:34:56Z: a leap day.
        assert_eq!(format_utc(at(1_709_210_096)), "2024-02-29T12:34:56");
        assert_eq!(
            format_utc(at(1_709_210_096) + Duration::from_millis(999)),
            "2024-02-29T12:34:56",
            "strftime drops the microseconds"
        );
        assert_eq!(parse_utc("2024-02-29T12:34:56"), Some(at(1_709_210_096)));
        assert_eq!(format_utc(at(4_102_444_800)), "2100-01-01T00:00:00");
        for t in [0u64, 86_399, 951_782_400, 1_700_000_000, 4_102_444_799] {
            assert_eq!(parse_utc(&format_utc(at(t))), Some(at(t)), "{t}");
        }
        for bad in [
            "",
            "2024-02-29 12:34:56",
            "2024-2-29T12:34:56",
            "2024-13-01T00:00:00",
            "2023-02-29T00:00:00",
            "x",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn data_is_pythons_json_dumps() {
        let data = LeaseData {
            version: 1,
            holder: "host \"7\" é".into(),
            end: "2024-02-29T12:34:56".into(),
        };
        // What `json.dumps({"version": 1, "holder": 'host "7" é', "end": ...})` prints.
        assert_eq!(
            String::from_utf8(data.encode()).unwrap(),
            r#"{"version": 1, "holder": "host \"7\" \u00e9", "end": "2024-02-29T12:34:56"}"#
        );
        assert_eq!(LeaseData::decode(&data.encode()).unwrap(), data);
        assert_eq!(python_json_string("😀"), r#""\ud83d\ude00""#);
        assert!(LeaseData::decode(b"{}").is_err());
    }

    #[test]
    fn decisions_follow_kazoo() {
        let hour = Duration::from_secs(3600);
        let now = at(1_700_000_000);
        let LeaseDecision::Take(first) = decide(None, "a", hour, now) else {
            panic!("free lease not taken");
        };
        assert_eq!(first.end, format_utc(now + hour));
        // Someone else, still running: held.
        assert_eq!(
            decide(Some(&first), "b", hour, now + Duration::from_secs(10)),
            LeaseDecision::Held
        );
        // The same identifier renews.
        assert!(matches!(
            decide(Some(&first), "a", hour, now + Duration::from_secs(10)),
            LeaseDecision::Take(_)
        ));
        // Expired: anyone takes it.
        assert!(matches!(
            decide(Some(&first), "b", hour, now + hour),
            LeaseDecision::Take(_)
        ));
        // Another format version: nobody takes it, not even the same holder.
        let future = LeaseData {
            version: 2,
            ..first.clone()
        };
        assert_eq!(
            decide(Some(&future), "a", hour, now),
            LeaseDecision::OtherVersion
        );
        // An unreadable end counts as expired.
        let broken = LeaseData {
            end: "soon".into(),
            ..first
        };
        assert!(matches!(
            decide(Some(&broken), "b", hour, now),
            LeaseDecision::Take(_)
        ));
    }
}
