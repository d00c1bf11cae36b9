//! Znode paths and payload formats of the procedure framework (HBase's `ZKProcedureUtil` layout
//! plus zkit's two liveness directories), and the checks that keep names single path segments.
//!
//! Pure: no I/O. The formats are described in the module docs of [`super`].

use std::collections::BTreeSet;

use super::decide::AbortReason;
use super::ProcedureError;

/// The znode paths of one signature under a base path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: String,
}

impl Layout {
    /// The layout of `signature` under `base` (e.g. `/zkit/procedure`).
    ///
    /// # Errors
    /// [`ProcedureError::BadName`] when `base` is not an absolute path or `signature` is not a
    /// valid single path segment.
    pub fn new(base: &str, signature: &str) -> Result<Layout, ProcedureError> {
        if !base.starts_with('/') {
            return Err(ProcedureError::BadName(format!(
                "base path must be absolute: {base:?}"
            )));
        }
        check_name("signature", signature)?;
        let base = base.trim_end_matches('/');
        Ok(Layout {
            root: format!("{base}/{signature}"),
        })
    }

    /// `<base>/<signature>`.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// `<base>/<signature>/acquired`.
    pub fn acquired_dir(&self) -> String {
        format!("{}/acquired", self.root)
    }
    /// `<base>/<signature>/reached`.
    pub fn reached_dir(&self) -> String {
        format!("{}/reached", self.root)
    }
    /// `<base>/<signature>/abort`.
    pub fn abort_dir(&self) -> String {
        format!("{}/abort", self.root)
    }
    /// `<base>/<signature>/members` (zkit: ephemeral liveness nodes of members).
    pub fn members_dir(&self) -> String {
        format!("{}/members", self.root)
    }
    /// `<base>/<signature>/running` (zkit: ephemeral owner nodes of running instances).
    pub fn running_dir(&self) -> String {
        format!("{}/running", self.root)
    }
    /// The five directories, parents first.
    pub fn dirs(&self) -> [String; 5] {
        [
            self.acquired_dir(),
            self.reached_dir(),
            self.abort_dir(),
            self.members_dir(),
            self.running_dir(),
        ]
    }

    /// `acquired/<instance>`.
    pub fn acquired(&self, instance: &str) -> String {
        format!("{}/acquired/{instance}", self.root)
    }
    /// `acquired/<instance>/<member>`.
    pub fn acquired_member(&self, instance: &str, member: &str) -> String {
        format!("{}/acquired/{instance}/{member}", self.root)
    }
    /// `reached/<instance>`.
    pub fn reached(&self, instance: &str) -> String {
        format!("{}/reached/{instance}", self.root)
    }
    /// `reached/<instance>/<member>`.
    pub fn reached_member(&self, instance: &str, member: &str) -> String {
        format!("{}/reached/{instance}/{member}", self.root)
    }
    /// `abort/<instance>`.
    pub fn abort(&self, instance: &str) -> String {
        format!("{}/abort/{instance}", self.root)
    }
    /// `members/<member>`.
    pub fn member(&self, member: &str) -> String {
        format!("{}/members/{member}", self.root)
    }
    /// `running/<instance>`.
    pub fn running(&self, instance: &str) -> String {
        format!("{}/running/{instance}", self.root)
    }
}

/// Checks that `name` (a signature, instance or member name) is one valid znode name.
///
/// # Errors
/// [`ProcedureError::BadName`] for empty names, `.`/`..`, `/`, control characters and the
/// characters ZooKeeper rejects in paths.
pub fn check_name(what: &str, name: &str) -> Result<(), ProcedureError> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.len() > 255
        || name.chars().any(|c| {
            c == '/' || c.is_control() || ('\u{e000}'..='\u{f8ff}').contains(&c) || c >= '\u{fff0}'
        });
    if bad {
        return Err(ProcedureError::BadName(format!(
            "invalid {what} name {name:?}"
        )));
    }
    Ok(())
}

/// What the coordinator writes into `acquired/<instance>`: a one-line JSON header, `\n`, then
/// the raw argument bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InstanceHeader {
    /// Format version, 1.
    pub v: u32,
    /// The expected members, so members can ignore instances not meant for them and a
    /// restarted coordinator knows whom to wait for.
    pub members: BTreeSet<String>,
    /// The coordinator's timeout in milliseconds (a recovering coordinator reuses it).
    pub timeout_ms: u64,
}

/// Encodes the data of `acquired/<instance>`.
pub fn encode_instance(header: &InstanceHeader, args: &[u8]) -> Vec<u8> {
    // Serializing a struct of strings and integers cannot fail.
    let mut data = serde_json::to_vec(header).unwrap_or_default();
    data.push(b'\n');
    data.extend_from_slice(args);
    data
}

/// Decodes the data of `acquired/<instance>`. Data without a valid header (written by a foreign
/// coordinator) is all arguments and names no members (`None`: every member takes part).
pub fn decode_instance(data: &[u8]) -> (Option<InstanceHeader>, Vec<u8>) {
    if let Some(newline) = data.iter().position(|b| *b == b'\n') {
        if let Ok(header) = serde_json::from_slice::<InstanceHeader>(&data[..newline]) {
            return (Some(header), data[newline + 1..].to_vec());
        }
    }
    (None, data.to_vec())
}

/// Encodes the data of `abort/<instance>` (JSON `{"source":…,"message":…}`).
pub fn encode_abort(reason: &AbortReason) -> Vec<u8> {
    serde_json::to_vec(reason).unwrap_or_default()
}

/// Decodes the data of `abort/<instance>`; anything that is not our JSON (e.g. HBase's
/// protobuf `ForeignException`) becomes a reason with an unknown source and the data as text.
pub fn decode_abort(data: &[u8]) -> AbortReason {
    serde_json::from_slice(data).unwrap_or_else(|_| {
        AbortReason::new(
            "unknown",
            format!("undecodable abort data: {}", String::from_utf8_lossy(data)),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_hbase_layout() {
        let l = Layout::new("/zkit/proc/", "flush").unwrap();
        assert_eq!(l.acquired("i1"), "/zkit/proc/flush/acquired/i1");
        assert_eq!(
            l.acquired_member("i1", "rs1"),
            "/zkit/proc/flush/acquired/i1/rs1"
        );
        assert_eq!(
            l.reached_member("i1", "rs1"),
            "/zkit/proc/flush/reached/i1/rs1"
        );
        assert_eq!(l.abort("i1"), "/zkit/proc/flush/abort/i1");
        assert_eq!(l.member("rs1"), "/zkit/proc/flush/members/rs1");
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["", ".", "..", "a/b", "a\u{0}", "x\u{1}"] {
            assert!(check_name("instance", bad).is_err(), "{bad:?}");
        }
        assert!(Layout::new("relative", "s").is_err());
        assert!(check_name("member", "rs-1.example:16020").is_ok());
    }

    #[test]
    fn instance_payload_round_trips_and_tolerates_foreign_data() {
        let header = InstanceHeader {
            v: 1,
            members: ["a".to_string(), "b".to_string()].into(),
            timeout_ms: 5000,
        };
        let args = b"table=t1\nwith newline";
        let (h, a) = decode_instance(&encode_instance(&header, args));
        assert_eq!(h, Some(header));
        assert_eq!(a, args);
        let (h, a) = decode_instance(b"PBUF\x0a\x02hi");
        assert_eq!(h, None);
        assert_eq!(a, b"PBUF\x0a\x02hi");
        let (h, a) = decode_instance(b"");
        assert_eq!((h, a), (None, Vec::new()));
    }

    #[test]
    fn abort_payload_round_trips_and_tolerates_garbage() {
        let reason = AbortReason::new("b", "disk full");
        assert_eq!(decode_abort(&encode_abort(&reason)), reason);
        assert_eq!(decode_abort(b"\xff\x00").source, "unknown");
    }
}
