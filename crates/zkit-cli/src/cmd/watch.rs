//! `zkit watch PATH`: one line per change of a node, `TYPE PATH`, across disconnects, server
//! restarts and session expiry.
//!
//! The client re-registers the persistent watch on every reconnect, but a server does not
//! replay to persistent watches the changes made while the client was disconnected
//! (ZOOKEEPER-4698: `DataTree.setWatches` compares the last zxid seen for data, exist and child
//! watches only). So the command remembers the watched node's last reported state — whether it
//! exists, and its `czxid`, `mzxid` and `pzxid` — re-reads it after each reconnect (and on a new
//! session after expiry), and prints a line for each kind of change it missed ([`missed`], the
//! pure part). After every event on the node itself it reads the node again, so the remembered
//! state always includes what was printed: a server sends a watch event before the reply of any
//! later request on the connection, so a change newer than that read still has its event
//! queued and is printed from it, not from the comparison.
//!
//! Must not: print a line for a change it has already printed (except in the one case said in
//! `--help`), or exit on a lost connection.

use std::io::Write as _;
use std::time::Duration;

use anyhow::{anyhow, Result};
use zkit_client::{AddWatchMode, Client, Error as ZkError, EventType, SessionState, Stat};

use super::conn::ConnArgs;
use super::print::node_error;

/// Pause between attempts to open a new session after the old one expired.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// What was last reported about the watched node (`None` in [`missed`]: it did not exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// zxid of the node's creation: a different one means it was deleted and created again.
    pub czxid: i64,
    /// zxid of the last data change (equal to `czxid` until the first one).
    pub mzxid: i64,
    /// zxid of the last child creation or deletion (equal to `czxid` until the first one).
    pub pzxid: i64,
}

impl Seen {
    /// The part of a node's Stat that tells its changes apart.
    pub fn of(stat: &Stat) -> Seen {
        Seen {
            czxid: stat.czxid,
            mzxid: stat.mzxid,
            pzxid: stat.pzxid,
        }
    }
}

/// The events a persistent watch would have delivered between `before` (the last reported
/// state) and `now` (a fresh read), one per kind of change, in the order they happened.
/// `children`: whether child changes count (a persistent watch delivers `NodeChildrenChanged`
/// for the node; a recursive one does not, it reports the children's own events).
pub fn missed(before: Option<Seen>, now: Option<Seen>, children: bool) -> Vec<EventType> {
    let changes_since_creation = |node: Seen| {
        let mut events = Vec::new();
        if node.mzxid > node.czxid {
            events.push(EventType::NodeDataChanged);
        }
        if children && node.pzxid > node.czxid {
            events.push(EventType::NodeChildrenChanged);
        }
        events
    };
    match (before, now) {
        (None, None) => Vec::new(),
        (Some(_), None) => vec![EventType::NodeDeleted],
        (None, Some(node)) => {
            let mut events = vec![EventType::NodeCreated];
            events.extend(changes_since_creation(node));
            events
        }
        (Some(old), Some(node)) if old.czxid != node.czxid => {
            let mut events = vec![EventType::NodeDeleted, EventType::NodeCreated];
            events.extend(changes_since_creation(node));
            events
        }
        (Some(old), Some(node)) => {
            let mut events = Vec::new();
            if node.mzxid > old.mzxid {
                events.push(EventType::NodeDataChanged);
            }
            if children && node.pzxid > old.pzxid {
                events.push(EventType::NodeChildrenChanged);
            }
            events
        }
    }
}

/// Prints event lines and counts them against `--count`.
struct Printer {
    printed: u64,
    count: Option<u64>,
}

impl Printer {
    fn done(&self) -> bool {
        self.count.is_some_and(|n| self.printed >= n)
    }

    /// Prints `TYPE PATH` unless the count is reached; flushes, for scripts reading lines.
    fn line(&mut self, event_type: EventType, path: &str) -> Result<()> {
        if self.done() {
            return Ok(());
        }
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{event_type:?} {path}")?;
        stdout.flush()?;
        self.printed += 1;
        Ok(())
    }
}

/// The watched node's state; `Err` only for a failed read (e.g. the connection dropped).
async fn read(client: &Client, path: &str) -> Result<Option<Seen>, ZkError> {
    Ok(client.check_stat(path).await?.as_ref().map(Seen::of))
}

/// Runs `zkit watch`: until `count` lines are printed, or forever.
///
/// # Errors
/// The first connect failing, a refused watch (bad path, no permission), authentication
/// failure, or a write to stdout failing. A lost connection or an expired session is not an
/// error: the command reconnects (or opens a new session) and reports what it missed.
pub async fn run(conn: &ConnArgs, path: &str, recursive: bool, count: Option<u64>) -> Result<()> {
    let mode = if recursive {
        AddWatchMode::PersistentRecursive
    } else {
        AddWatchMode::Persistent
    };
    let children = !recursive;
    let mut printer = Printer { printed: 0, count };
    let mut client = conn.client().await?;
    // What was last reported about `path`; `None` before the first read.
    let mut last: Option<Option<Seen>> = None;
    loop {
        let mut watcher = client
            .watch(path, mode)
            .await
            .map_err(|e| node_error(e, path))?;
        // Read after the watch is set: a change after this read has its event queued.
        let now = read(&client, path).await.map_err(|e| node_error(e, path))?;
        match last {
            // On stderr, so scripts (and tests) know events from now on will be seen.
            None => eprintln!("watching {path}"),
            // A new session after expiry: report what changed while there was none.
            Some(before) => {
                for event_type in missed(before, now, children) {
                    printer.line(event_type, path)?;
                }
            }
        }
        last = Some(now);
        while !printer.done() {
            let event = watcher.changed().await;
            if event.event_type != EventType::Session {
                printer.line(event.event_type, &event.path)?;
                if event.path == path {
                    // Remember the state that includes this event. Should the read fail (the
                    // connection dropped), the re-read after the reconnect compares with the
                    // state before this event and prints it a second time.
                    if let Ok(now) = read(&client, path).await {
                        last = Some(now);
                    }
                }
                continue;
            }
            match event.session_state {
                SessionState::Disconnected => eprintln!("session Disconnected"),
                state @ (SessionState::SyncConnected | SessionState::ConnectedReadOnly) => {
                    eprintln!("session {state:?}");
                    // The watch is registered again; report what changed while disconnected.
                    // If this read fails the connection is gone again, and the next
                    // reconnect compares with the same remembered state.
                    match read(&client, path).await {
                        Ok(now) => {
                            for event_type in missed(last.flatten(), now, children) {
                                printer.line(event_type, path)?;
                            }
                            last = Some(now);
                        }
                        Err(err) => eprintln!("re-reading {path} after the reconnect: {err}"),
                    }
                }
                SessionState::Expired => {
                    eprintln!("session Expired: opening a new session");
                    break;
                }
                state @ (SessionState::AuthFailed | SessionState::Closed) => {
                    return Err(anyhow!("session ended while watching {path} ({state:?})"));
                }
            }
        }
        if printer.done() {
            return Ok(());
        }
        client = loop {
            match conn.client().await {
                Ok(client) => break client,
                Err(err) => {
                    eprintln!("{err:#}; retrying");
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use EventType::*;

    fn seen(czxid: i64, mzxid: i64, pzxid: i64) -> Option<Seen> {
        Some(Seen {
            czxid,
            mzxid,
            pzxid,
        })
    }

    #[test]
    fn nothing_missed_when_nothing_changed() {
        assert_eq!(missed(None, None, true), vec![]);
        assert_eq!(missed(seen(1, 5, 3), seen(1, 5, 3), true), vec![]);
    }

    #[test]
    fn data_and_child_changes_while_disconnected() {
        assert_eq!(
            missed(seen(1, 5, 3), seen(1, 9, 3), true),
            vec![NodeDataChanged]
        );
        assert_eq!(
            missed(seen(1, 5, 3), seen(1, 5, 8), true),
            vec![NodeChildrenChanged]
        );
        assert_eq!(
            missed(seen(1, 5, 3), seen(1, 9, 8), true),
            vec![NodeDataChanged, NodeChildrenChanged]
        );
        // A recursive watch reports children through their own events, never as a change of
        // the node's child list.
        assert_eq!(missed(seen(1, 5, 3), seen(1, 5, 8), false), vec![]);
    }

    #[test]
    fn creation_deletion_and_replacement() {
        assert_eq!(missed(None, seen(7, 7, 7), true), vec![NodeCreated]);
        assert_eq!(
            missed(None, seen(7, 8, 9), true),
            vec![NodeCreated, NodeDataChanged, NodeChildrenChanged]
        );
        assert_eq!(missed(seen(1, 5, 3), None, true), vec![NodeDeleted]);
        assert_eq!(
            missed(seen(1, 5, 3), seen(7, 7, 7), true),
            vec![NodeDeleted, NodeCreated]
        );
        assert_eq!(
            missed(seen(1, 5, 3), seen(7, 9, 7), false),
            vec![NodeDeleted, NodeCreated, NodeDataChanged]
        );
    }
}
