//! Server status through the AdminServer's JSON commands (`/commands/<name>`, ZooKeeper 3.5+'s
//! `JettyAdminServer`, and zkit serve's admin endpoint), for servers whose four-letter-word
//! whitelist is closed (zkit serve and Apache answer only `srvr` by default, while every
//! AdminServer command is served). The same facts as [`crate::four_letter`], from
//! `monitor`, `server_stats`, `dump`, `connections` and `watches`; the conversions are pure.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::four_letter::{Connection, Dump};

fn sid_key(k: &str) -> Option<i64> {
    // The JSON keys are decimal session ids (Java's `Long.toString`).
    k.parse::<i64>().ok()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `monitor` as `mntr`'s map (keys without `zk_`, values as text).
pub fn monitor(v: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(o) = v.as_object() {
        for (k, v) in o {
            if k == "command" || k == "error" {
                continue;
            }
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => continue,
            };
            out.insert(k.clone(), text);
        }
    }
    out
}

/// `server_stats`: `(version, zxid as 0x…, mode)`.
pub fn server_stats(v: &Value) -> (Option<String>, Option<String>, Option<String>) {
    let version = v["version"].as_str().map(str::to_string);
    let stats = &v["server_stats"];
    let zxid = stats["last_processed_zxid"]
        .as_i64()
        .map(|z| format!("{:#x}", z as u64));
    let mode = stats["server_state"].as_str().map(str::to_string);
    (version, zxid, mode)
}

/// `dump`: live sessions and their ephemerals.
pub fn dump(v: &Value) -> Dump {
    let mut d = Dump::default();
    if let Some(o) = v["expiry_time_to_session_ids"].as_object() {
        for ids in o.values() {
            d.sessions.extend(
                ids.as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_i64),
            );
        }
    }
    if let Some(o) = v["session_id_to_ephemeral_paths"].as_object() {
        for (k, paths) in o {
            if let Some(sid) = sid_key(k) {
                let mut p = strings(paths);
                p.sort();
                d.ephemerals.insert(sid, p);
            }
        }
    }
    d.sessions.sort_unstable();
    d.sessions.dedup();
    d
}

/// `connections`.
pub fn connections(v: &Value) -> Vec<Connection> {
    v["connections"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| Connection {
            peer: c["remote_socket_address"]
                .as_str()
                .unwrap_or("")
                .trim_start_matches('/')
                .to_string(),
            session: c["session_id"].as_i64(),
            timeout_ms: c["session_timeout"].as_u64(),
            queued: c["outstanding_requests"].as_u64().unwrap_or(0),
            received: c["packets_received"].as_u64().unwrap_or(0),
            sent: c["packets_sent"].as_u64().unwrap_or(0),
        })
        .collect()
}

/// `watches`: watched paths by session.
pub fn watches(v: &Value) -> BTreeMap<i64, Vec<String>> {
    v["session_id_to_watched_paths"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, paths)| Some((sid_key(k)?, strings(paths))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn admin_commands_convert() {
        let m = monitor(
            &json!({"command":"monitor","error":null,"znode_count":5,"server_state":"standalone","avg_latency":0.5}),
        );
        assert_eq!(m["znode_count"], "5");
        assert_eq!(m["avg_latency"], "0.5");
        assert!(!m.contains_key("command"));

        let (version, zxid, mode) = server_stats(
            &json!({"version":"3.8.4","server_stats":{"last_processed_zxid":255,"server_state":"standalone"}}),
        );
        assert_eq!(version.as_deref(), Some("3.8.4"));
        assert_eq!(zxid.as_deref(), Some("0xff"));
        assert_eq!(mode.as_deref(), Some("standalone"));

        let d = dump(
            &json!({"expiry_time_to_session_ids":{"1000":[2,1]},"session_id_to_ephemeral_paths":{"2":["/b","/a"]}}),
        );
        assert_eq!(d.sessions, vec![1, 2]);
        assert_eq!(d.ephemerals[&2], vec!["/a", "/b"]);

        let c = connections(
            &json!({"connections":[{"remote_socket_address":"/127.0.0.1:5","session_id":7,"session_timeout":4000,"outstanding_requests":0,"packets_received":3,"packets_sent":4},{"remote_socket_address":"/127.0.0.1:6"}]}),
        );
        assert_eq!(c[0].peer, "127.0.0.1:5");
        assert_eq!((c[0].session, c[0].timeout_ms), (Some(7), Some(4000)));
        assert_eq!(c[1].session, None);

        let w = watches(&json!({"session_id_to_watched_paths":{"7":["/x"]}}));
        assert_eq!(w[&7], vec!["/x"]);
    }
}
