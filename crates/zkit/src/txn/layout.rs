//! Znode paths and data formats of the two-phase-commit coordinator (pure: no I/O).
//!
//! Everything lives under one root (default [`super::DEFAULT_ROOT`]); see [`super`] for the table.
//! Names that are not transaction ids (`members`, `inbox`, `coordinators`) are reserved.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::decide::{Decision, Vote};
use super::TxnError;

/// Children of the root that are not transactions.
pub const RESERVED: [&str; 3] = ["members", "inbox", "coordinators"];

/// The znode paths of one transaction tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: String,
}

impl Layout {
    /// A layout under `root` (an absolute path without trailing `/`).
    ///
    /// # Errors
    /// [`TxnError::BadArguments`] when `root` is not absolute.
    pub fn new(root: &str) -> Result<Layout, TxnError> {
        let root = root.trim_end_matches('/');
        if !root.starts_with('/') || root.len() < 2 {
            return Err(TxnError::BadArguments(format!(
                "root must be an absolute path below /, got {root:?}"
            )));
        }
        Ok(Layout {
            root: root.to_string(),
        })
    }

    /// The root.
    pub fn root(&self) -> &str {
        &self.root
    }
    /// `members/`: one ephemeral node per live participant.
    pub fn members_dir(&self) -> String {
        format!("{}/members", self.root)
    }
    /// `members/<participant>`.
    pub fn member(&self, participant: &str) -> String {
        format!("{}/members/{participant}", self.root)
    }
    /// `inbox/`: one directory per participant.
    pub fn inbox_root(&self) -> String {
        format!("{}/inbox", self.root)
    }
    /// `inbox/<participant>`: the participant's pending transactions.
    pub fn inbox(&self, participant: &str) -> String {
        format!("{}/inbox/{participant}", self.root)
    }
    /// `inbox/<participant>/<txid>`.
    pub fn inbox_entry(&self, participant: &str, txid: &str) -> String {
        format!("{}/inbox/{participant}/{txid}", self.root)
    }
    /// `coordinators/`.
    pub fn coordinators_dir(&self) -> String {
        format!("{}/coordinators", self.root)
    }
    /// `coordinators/live/`: one ephemeral node per live coordinator.
    pub fn live_dir(&self) -> String {
        format!("{}/coordinators/live", self.root)
    }
    /// `coordinators/live/<id>`.
    pub fn live(&self, coordinator: &str) -> String {
        format!("{}/coordinators/live/{coordinator}", self.root)
    }
    /// `coordinators/leader`: the lock directory whose holder is the recovering leader.
    pub fn leader_dir(&self) -> String {
        format!("{}/coordinators/leader", self.root)
    }
    /// `<txid>`.
    pub fn txn(&self, txid: &str) -> String {
        format!("{}/{txid}", self.root)
    }
    /// `<txid>/prepare`.
    pub fn prepare(&self, txid: &str) -> String {
        format!("{}/{txid}/prepare", self.root)
    }
    /// `<txid>/votes`.
    pub fn votes(&self, txid: &str) -> String {
        format!("{}/{txid}/votes", self.root)
    }
    /// `<txid>/votes/<participant>`.
    pub fn vote(&self, txid: &str, participant: &str) -> String {
        format!("{}/{txid}/votes/{participant}", self.root)
    }
    /// `<txid>/decision`.
    pub fn decision(&self, txid: &str) -> String {
        format!("{}/{txid}/decision", self.root)
    }
    /// `<txid>/owner`: ephemeral, the coordinator running `commit()`; while it exists the
    /// transaction is not collected, so its coordinator can always read the decision.
    pub fn owner(&self, txid: &str) -> String {
        format!("{}/{txid}/owner", self.root)
    }
    /// `<txid>/acks`.
    pub fn acks(&self, txid: &str) -> String {
        format!("{}/{txid}/acks", self.root)
    }
    /// `<txid>/acks/<participant>`.
    pub fn ack(&self, txid: &str, participant: &str) -> String {
        format!("{}/{txid}/acks/{participant}", self.root)
    }
}

/// Checks a participant name or transaction id: one non-empty znode name, not reserved.
///
/// # Errors
/// [`TxnError::BadArguments`] naming `what`.
pub fn check_name(what: &str, name: &str) -> Result<(), TxnError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name != "."
        && name != ".."
        && !RESERVED.contains(&name)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if ok {
        Ok(())
    } else {
        Err(TxnError::BadArguments(format!(
            "{what} {name:?} must be 1-200 of [A-Za-z0-9-_.:] and not one of {RESERVED:?}"
        )))
    }
}

/// The header of `<txid>/prepare` (one JSON line, then `\n`, then the raw payload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepareHeader {
    /// Format version (1).
    pub v: u32,
    /// The participants that must all vote yes.
    pub participants: BTreeSet<String>,
    /// Votes missing at this wall-clock time (Unix ms) mean abort (presumed abort).
    pub deadline_ms: u64,
    /// The id of the coordinator that began it (`coordinators/live/<id>` while it lives).
    pub coordinator: String,
    /// When it began (Unix ms).
    pub created_ms: u64,
}

/// Encodes `<txid>/prepare`.
pub fn encode_prepare(header: &PrepareHeader, payload: &[u8]) -> Vec<u8> {
    // Serializing a struct of strings and integers cannot fail.
    let mut out = serde_json::to_vec(header).unwrap_or_default();
    out.push(b'\n');
    out.extend_from_slice(payload);
    out
}

/// Decodes `<txid>/prepare` into header and payload.
///
/// # Errors
/// [`TxnError::Corrupt`] when the header is missing or not valid JSON.
pub fn decode_prepare(data: &[u8]) -> Result<(PrepareHeader, Vec<u8>), TxnError> {
    let newline = data
        .iter()
        .position(|b| *b == b'\n')
        .ok_or_else(|| TxnError::Corrupt("prepare without header line".into()))?;
    let header: PrepareHeader = serde_json::from_slice(&data[..newline])
        .map_err(|e| TxnError::Corrupt(format!("prepare header: {e}")))?;
    Ok((header, data[newline + 1..].to_vec()))
}

/// Encodes a vote: `yes`, or `no: <reason>`.
pub fn encode_vote(vote: &Vote) -> Vec<u8> {
    match vote {
        Vote::Yes => b"yes".to_vec(),
        Vote::No(reason) => format!("no: {reason}").into_bytes(),
    }
}

/// Decodes a vote. Anything but `yes` is a no (an unreadable vote must never commit).
pub fn decode_vote(data: &[u8]) -> Vote {
    match data {
        b"yes" => Vote::Yes,
        other => {
            let text = String::from_utf8_lossy(other);
            let reason = text.strip_prefix("no: ").unwrap_or(&text);
            Vote::No(reason.to_string())
        }
    }
}

#[derive(Serialize, Deserialize)]
struct DecisionRecord {
    decision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    by: String,
}

/// Encodes `<txid>/decision`: `{"decision":"commit"|"abort","reason":…,"by":"<writer>"}`.
pub fn encode_decision(decision: &Decision, by: &str) -> Vec<u8> {
    let record = match decision {
        Decision::Commit => DecisionRecord {
            decision: "commit".into(),
            reason: None,
            by: by.into(),
        },
        Decision::Abort(reason) => DecisionRecord {
            decision: "abort".into(),
            reason: Some(reason.clone()),
            by: by.into(),
        },
    };
    serde_json::to_vec(&record).unwrap_or_default()
}

/// Decodes `<txid>/decision` into the decision and who wrote it. Anything unreadable is an abort:
/// a decision nobody can read must not make anyone commit.
pub fn decode_decision(data: &[u8]) -> (Decision, String) {
    match serde_json::from_slice::<DecisionRecord>(data) {
        Ok(record) if record.decision == "commit" => (Decision::Commit, record.by),
        Ok(record) => (
            Decision::Abort(record.reason.unwrap_or_else(|| "no reason given".into())),
            record.by,
        ),
        Err(err) => (
            Decision::Abort(format!("unreadable decision: {err}")),
            "unknown".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_round_trips_and_rejects_garbage() {
        let header = PrepareHeader {
            v: 1,
            participants: ["P1".to_string(), "P2".to_string()].into(),
            deadline_ms: 42,
            coordinator: "c1".into(),
            created_ms: 7,
        };
        let data = encode_prepare(&header, b"pay\nload");
        let (decoded, payload) = decode_prepare(&data).expect("decodes");
        assert_eq!(decoded, header);
        assert_eq!(payload, b"pay\nload");
        assert!(decode_prepare(b"no header").is_err());
        assert!(decode_prepare(b"{bad json}\nx").is_err());
    }

    #[test]
    fn votes_and_decisions_round_trip_and_default_to_abort() {
        for vote in [Vote::Yes, Vote::No("disk full".into())] {
            assert_eq!(decode_vote(&encode_vote(&vote)), vote);
        }
        assert_eq!(decode_vote(b"YES"), Vote::No("YES".into()));
        for decision in [Decision::Commit, Decision::Abort("P2 voted no".into())] {
            let (decoded, by) = decode_decision(&encode_decision(&decision, "c1"));
            assert_eq!((decoded, by.as_str()), (decision, "c1"));
        }
        assert!(matches!(
            decode_decision(b"commit"),
            (Decision::Abort(_), _)
        ));
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("participant", "P1").is_ok());
        for bad in ["", "a/b", "members", "inbox", "..", "x y"] {
            assert!(check_name("participant", bad).is_err(), "{bad:?}");
        }
        assert!(Layout::new("relative").is_err());
        let layout = Layout::new("/zkit/txn/").expect("valid");
        assert_eq!(layout.vote("tx-1", "P1"), "/zkit/txn/tx-1/votes/P1");
    }
}
