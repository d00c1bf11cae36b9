//! The pure part of Curator's `DistributedQueue` family: item node names, their order, and
//! the item data format. No I/O.
//!
//! - Items are persistent sequential children `queue-<suffix>NNNNNNNNNN` of the queue node
//!   (Curator's `QUEUE_ITEM_NAME`); children not starting with `queue-` are foreign and ignored.
//! - [`QueueKind::Fifo`] (`DistributedQueue`): no suffix, sorted by name.
//! - [`QueueKind::Priority`] (`DistributedPriorityQueue`): suffix [`priority_to_string`], a
//!   sign digit and the priority as 8 upper-case hex digits, so that sorting by name puts
//!   *lower* priority values first (and negative ones before all others).
//! - [`QueueKind::Delay`] (`DistributedDelayQueue`): suffix `|<epoch ms in hex>|`
//!   ([`epoch_to_string`]); sorted by that time, and an item is not taken before it.
//! - [`QueueKind::Id`] (`DistributedIdQueue`): suffix `|<id>|` (`/` and `|` in the id become
//!   `_`); sorted by the name without the id (so by sequence: FIFO), removable by id.
//! - The data of an item node is Curator's `ItemSerializer` framing, which can hold several
//!   items (`putMulti`): the version `0x00010001` (4 bytes, big-endian), then per item the
//!   opcode `0x01`, its length (4 bytes) and its bytes, then the opcode `0x02`.

use crate::error::{Error, Result};

/// Curator's `QUEUE_ITEM_NAME`: every item node's name starts with it.
pub const QUEUE_ITEM_NAME: &str = "queue-";
/// Separator around a delay queue's time and an id queue's id.
pub const SEPARATOR: char = '|';

const VERSION: u32 = 0x0001_0001;
const ITEM_OPCODE: u8 = 0x01;
const EOF_OPCODE: u8 = 0x02;

/// Which member of the family a queue is: how its items are named and ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueKind {
    /// First in, first out.
    Fifo,
    /// Lower priority values first.
    Priority,
    /// Each item is due at a time; earliest first, none before its time.
    Delay,
    /// FIFO, and items carry an id they can be removed by.
    Id,
}

/// Curator's `DistributedPriorityQueue.priorityToString`: `"1"` for priorities ≥ 0 (`"0"`
/// below), then the priority's 32 bits as 8 upper-case hex digits.
pub fn priority_to_string(priority: i32) -> String {
    let sign = if priority >= 0 { '1' } else { '0' };
    // Two's complement bits, as Java's `(long) priority & 0xFFFFFFFFL`.
    format!("{sign}{:08X}", priority as u32)
}

/// Curator's `DistributedDelayQueue.epochToString`: `|`, the time in ms since the epoch as at
/// least 8 upper-case hex digits, `|`.
pub fn epoch_to_string(epoch_ms: i64) -> String {
    format!("{SEPARATOR}{epoch_ms:08X}{SEPARATOR}")
}

/// Curator's `DistributedDelayQueue.getEpoch`: the time between the last two `|` of a name;
/// 0 when there is none (due at once).
pub fn epoch_of(name: &str) -> i64 {
    let Some(second) = name.rfind(SEPARATOR) else {
        return 0;
    };
    if second == 0 {
        return 0;
    }
    let Some(first) = name[..second].rfind(SEPARATOR) else {
        return 0;
    };
    if first == 0 || second <= first + 1 {
        return 0;
    }
    i64::from_str_radix(&name[first + 1..second], 16).unwrap_or(0)
}

/// Curator's `DistributedIdQueue.fixId`: `/` and `|` become `_`.
pub fn fix_id(id: &str) -> String {
    id.replace(['/', SEPARATOR], "_")
}

/// The name suffix of an id queue item: `|<fixed id>|`.
pub fn id_to_string(id: &str) -> String {
    format!("{SEPARATOR}{}{SEPARATOR}", fix_id(id))
}

/// Curator's `DistributedIdQueue.parseId`: the id between the first two `|`, and the name
/// without it. A name without two `|` is its own id and cleaned name.
pub fn parse_id(name: &str) -> (&str, String) {
    let Some(first) = name.find(SEPARATOR) else {
        return (name, name.to_string());
    };
    let Some(len) = name[first + 1..].find(SEPARATOR) else {
        return (name, name.to_string());
    };
    let second = first + 1 + len;
    (
        &name[first + 1..second],
        format!("{}{}", &name[..first], &name[second + 1..]),
    )
}

/// The items among `children` (foreign nodes dropped), in the order `kind` takes them.
pub fn sorted_items<S: AsRef<str>>(kind: QueueKind, children: &[S]) -> Vec<&str> {
    let mut items: Vec<&str> = children
        .iter()
        .map(AsRef::as_ref)
        .filter(|c| c.starts_with(QUEUE_ITEM_NAME))
        .collect();
    match kind {
        QueueKind::Fifo | QueueKind::Priority => items.sort_unstable(),
        QueueKind::Delay => items.sort_by(|a, b| epoch_of(a).cmp(&epoch_of(b)).then(a.cmp(b))),
        QueueKind::Id => items.sort_by_cached_key(|name| parse_id(name).1),
    }
    items
}

/// How long until the item `name` of a queue of `kind` is due at `now_ms` (0: due).
pub fn delay_ms(kind: QueueKind, name: &str, now_ms: i64) -> i64 {
    match kind {
        QueueKind::Delay => epoch_of(name).saturating_sub(now_ms).max(0),
        _ => 0,
    }
}

/// Curator's `ItemSerializer.serialize` of `items` (one node's data).
pub fn encode_items<I: AsRef<[u8]>>(items: &[I]) -> Vec<u8> {
    let len: usize = items.iter().map(|i| i.as_ref().len() + 5).sum();
    let mut out = Vec::with_capacity(4 + len + 1);
    out.extend_from_slice(&VERSION.to_be_bytes());
    for item in items {
        let item = item.as_ref();
        out.push(ITEM_OPCODE);
        // Items are bounded by ZooKeeper's frame limit (1 MB by default), far below i32::MAX.
        out.extend_from_slice(&(item.len() as u32).to_be_bytes());
        out.extend_from_slice(item);
    }
    out.push(EOF_OPCODE);
    out
}

/// Curator's `ItemSerializer.deserialize`: the items of one node's data.
///
/// # Errors
/// [`Error::Unexpected`] for another version, an unknown opcode, a negative or too long size,
/// or truncated data (Curator logs "Corrupted queue item" and skips such a node).
pub fn decode_items(bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
    let corrupt = |why: &str| Error::Unexpected(format!("corrupted queue item: {why}"));
    let (version, mut rest) = bytes
        .split_first_chunk::<4>()
        .ok_or_else(|| corrupt("no version"))?;
    if u32::from_be_bytes(*version) != VERSION {
        return Err(corrupt(&format!(
            "version {:#x}, expected {VERSION:#x}",
            u32::from_be_bytes(*version)
        )));
    }
    let mut items = Vec::new();
    loop {
        let (&opcode, tail) = rest.split_first().ok_or_else(|| corrupt("no EOF opcode"))?;
        match opcode {
            EOF_OPCODE => return Ok(items),
            ITEM_OPCODE => {}
            other => return Err(corrupt(&format!("opcode {other:#x}"))),
        }
        let (size, tail) = tail
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt("no size"))?;
        let size = i32::from_be_bytes(*size);
        let size = usize::try_from(size).map_err(|_| corrupt(&format!("size {size}")))?;
        if tail.len() < size {
            return Err(corrupt("truncated item"));
        }
        let (item, tail) = tail.split_at(size);
        items.push(item.to_vec());
        rest = tail;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_sort_like_curator() {
        assert_eq!(priority_to_string(0), "100000000");
        assert_eq!(priority_to_string(10), "10000000A");
        assert_eq!(priority_to_string(-1), "0FFFFFFFF");
        assert_eq!(priority_to_string(i32::MIN), "080000000");
        let mut names: Vec<String> = [5, -3, 100, 0, -100, 7]
            .iter()
            .enumerate()
            .map(|(i, p)| format!("queue-{}{:010}", priority_to_string(*p), i))
            .collect();
        names.reverse();
        let sorted = sorted_items(QueueKind::Priority, &names);
        let order: Vec<i32> = sorted
            .iter()
            .map(|n| {
                let hex = &n[7..15];
                u32::from_str_radix(hex, 16).unwrap() as i32
            })
            .collect();
        assert_eq!(order, vec![-100, -3, 0, 5, 7, 100], "lower values first");
    }

    #[test]
    fn delays_parse_and_sort_like_curator() {
        let t = 1_700_000_000_123i64;
        assert_eq!(epoch_to_string(t), "|18BCFE5687B|");
        assert_eq!(epoch_to_string(1), "|00000001|");
        let name = format!("queue-{}0000000003", epoch_to_string(t));
        assert_eq!(epoch_of(&name), t);
        assert_eq!(epoch_of("queue-0000000001"), 0);
        assert_eq!(epoch_of("queue-|zz|0000000001"), 0, "not hex");
        assert_eq!(epoch_of("queue-||0000000001"), 0);
        let later = format!("queue-{}0000000001", epoch_to_string(t + 5));
        let sooner = format!("queue-{}0000000002", epoch_to_string(t));
        let children = vec![later.clone(), "foreign".to_string(), sooner.clone()];
        assert_eq!(
            sorted_items(QueueKind::Delay, &children),
            vec![&sooner, &later]
        );
        assert_eq!(delay_ms(QueueKind::Delay, &later, t), 5);
        assert_eq!(delay_ms(QueueKind::Delay, &later, t + 10), 0);
        assert_eq!(delay_ms(QueueKind::Fifo, &later, 0), 0);
    }

    #[test]
    fn ids_parse_and_sort_like_curator() {
        assert_eq!(id_to_string("a/b|c"), "|a_b_c|");
        assert_eq!(
            parse_id("queue-|job-7|0000000004"),
            ("job-7", "queue-0000000004".to_string())
        );
        assert_eq!(
            parse_id("queue-0000000004"),
            ("queue-0000000004", "queue-0000000004".to_string())
        );
        let children = [
            "queue-|zzz|0000000002",
            "queue-|aaa|0000000003",
            "queue-|mmm|0000000001",
        ];
        assert_eq!(
            sorted_items(QueueKind::Id, &children),
            vec![
                "queue-|mmm|0000000001",
                "queue-|zzz|0000000002",
                "queue-|aaa|0000000003"
            ],
            "FIFO, whatever the ids"
        );
    }

    #[test]
    fn item_framing_round_trips_and_rejects_corruption() {
        let bytes = encode_items(&[b"ab".as_slice(), b"", b"xyz"]);
        assert_eq!(
            bytes,
            [
                &[0, 1, 0, 1][..],
                &[1, 0, 0, 0, 2],
                b"ab",
                &[1, 0, 0, 0, 0],
                &[1, 0, 0, 0, 3],
                b"xyz",
                &[2]
            ]
            .concat()
        );
        assert_eq!(
            decode_items(&bytes).unwrap(),
            vec![b"ab".to_vec(), vec![], b"xyz".to_vec()]
        );
        assert_eq!(
            decode_items(&encode_items::<&[u8]>(&[])).unwrap(),
            Vec::<Vec<u8>>::new()
        );
        for cut in 0..bytes.len() {
            assert!(decode_items(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[4] = 9;
        assert!(decode_items(&bad).is_err());
        let mut negative = bytes.clone();
        negative[5] = 0xff;
        assert!(decode_items(&negative).is_err());
        assert!(decode_items(&[0, 1, 0, 2, 2]).is_err(), "other version");
    }
}
