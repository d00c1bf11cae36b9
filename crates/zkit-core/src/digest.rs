//! Apache's tree digest (`DigestCalculator` and `DataTree.getTreeDigest` of ZooKeeper 3.8),
//! which the four-letter word `hash` and the admin `hash` command report: a CRC-32 per node
//! over its path, data and persisted stat, summed over the tree. Pure functions of the tree;
//! the tests reproduce digests read from a live Apache server.

use crate::tree::{DataTree, Meta};

/// CRC-32 (IEEE 802.3, reflected, as zlib and `java.util.zip.CRC32`) lookup table.
const CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// Feeds `bytes` into a running CRC-32 register (start with `!0`, finish with `!`).
fn crc32_update(mut crc: u32, bytes: &[u8]) -> u32 {
    for b in bytes {
        crc = CRC32_TABLE[((crc ^ u32::from(*b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// `DigestCalculator.DIGEST_VERSION` of ZooKeeper 3.8, reported by the admin `hash` command.
pub const DIGEST_VERSION: i32 = 2;

/// One node's digest, exactly as ZooKeeper 3.8's `DigestCalculator.calculateDigest`: CRC-32
/// over the path ("/" hashed as ""), the data, then czxid, mzxid, pzxid, ctime, mtime (8 bytes
/// each, big-endian), version, cversion, aversion (4 bytes) and ephemeralOwner (8 bytes) as
/// *persisted*: the stored cversion (child creates) and the raw owner (container/TTL marks
/// included). Nodes under `/zookeeper/` digest to 0: Apache skips them because quota nodes
/// are updated locally on each server.
pub fn node_digest(path: &str, data: Option<&[u8]>, node: &Meta) -> i64 {
    if path.starts_with("/zookeeper/") {
        return 0;
    }
    let path = if path == "/" { "" } else { path };
    let mut crc = crc32_update(!0, path.as_bytes());
    crc = crc32_update(crc, data.unwrap_or_default());
    for long in [node.czxid, node.mzxid, node.pzxid, node.ctime, node.mtime] {
        crc = crc32_update(crc, &long.to_be_bytes());
    }
    for int in [node.version, node.cversion, node.aversion] {
        crc = crc32_update(crc, &int.to_be_bytes());
    }
    crc = crc32_update(crc, &node.ephemeral_owner.to_be_bytes());
    i64::from(!crc)
}

/// The tree digest (`DataTree.getTreeDigest`): the wrapping sum of every node's digest
/// (Apache's `AdHash`). Apache keeps it incrementally; zkit computes it on demand in one pass,
/// which costs a CRC over every znode's data while the pipeline waits.
pub fn tree_digest(tree: &DataTree) -> i64 {
    tree.nodes().fold(0i64, |sum, (path, node)| {
        sum.wrapping_add(node_digest(path, node.data(), &node))
    })
}

#[cfg(test)]
mod tests {
    use super::node_digest;
    use crate::image::StoredStat;
    use crate::tree::Meta;

    /// A node as getData showed it on Apache: (path, data, czxid, mzxid, pzxid, ctime, mtime,
    /// version, client-visible cversion, aversion, *persisted* ephemeralOwner, numChildren).
    type Row = (
        &'static str,
        &'static [u8],
        i64,
        i64,
        i64,
        i64,
        i64,
        i32,
        i32,
        i32,
        i64,
        i32,
    );

    /// The digest `node_digest` gives a tree of `rows`, summed as `tree_digest` does.
    fn digest_of(rows: &[Row]) -> i64 {
        rows.iter().fold(0i64, |sum, row| {
            let &(path, data, czxid, mzxid, pzxid, ctime, mtime, version, cv, aversion, owner, n) =
                row;
            let node = Meta {
                stat: StoredStat {
                    czxid,
                    mzxid,
                    ctime,
                    mtime,
                    version,
                    // Persisted cversion counts child creates: visible = 2 * stored - children.
                    cversion: (cv + n) / 2,
                    aversion,
                    ephemeral_owner: owner,
                    pzxid,
                },
                acl: 0,
            };
            sum.wrapping_add(node_digest(path, Some(data), &node))
        })
    }

    /// Captured from Apache ZooKeeper 3.8 (Debian 3.8.0): a fresh server, one kazoo session
    /// (zxid 1), then create /a "alpha", /a/b, ephemeral /a/e "eph", sequential /a/s- "seq",
    /// create and delete /a/gone, setACL /a/b, setData / "root-data", and setData /a until
    /// zxid 0x80, where `hash` printed `80: 9311984259`.
    #[test]
    fn tree_digest_matches_apache() {
        let rows: [Row; 8] = [
            ("/", b"root-data", 0, 9, 2, 0, 1796005160247, 1, 0, 0, 0, 2),
            (
                "/a",
                b"alpha118",
                2,
                128,
                7,
                1796005160218,
                1796005160635,
                119,
                5,
                0,
                0,
                3,
            ),
            (
                "/a/b",
                b"",
                3,
                3,
                3,
                1796005160231,
                1796005160231,
                0,
                0,
                1,
                0,
                0,
            ),
            (
                "/a/e",
                b"eph",
                4,
                4,
                4,
                1796005160234,
                1796005160234,
                0,
                0,
                0,
                72058304541753344,
                0,
            ),
            (
                "/a/s-0000000002",
                b"seq",
                5,
                5,
                5,
                1796005160236,
                1796005160236,
                0,
                0,
                0,
                0,
                0,
            ),
            ("/zookeeper", b"", 0, 0, 0, 0, 0, 0, -2, 0, 0, 2),
            ("/zookeeper/config", b"", 0, 0, 0, 0, 0, 0, 0, -1, 0, 0),
            ("/zookeeper/quota", b"", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        ];
        assert_eq!(digest_of(&rows), 9_311_984_259);
    }

    /// Captured the same way with a container and a TTL node: zkCli `create -c /c cdata`,
    /// `create /c/k kid`, `create -t 3600000 /t tt` (zxids 1-5 with its session), then a kazoo
    /// session setting /c/k until zxid 0x80: `hash` printed `80: 11259261650`. Apache digests
    /// the persisted owners (container mark, TTL encoding), which clients see as 0, and which
    /// zkit's core stores the same way.
    #[test]
    fn tree_digest_matches_apache_with_container_and_ttl() {
        let container = crate::tree::CONTAINER_OWNER;
        let ttl = crate::tree::ttl_owner(3_600_000);
        assert_eq!((container, ttl), (i64::MIN, -72_057_594_034_327_936));
        let rows: [Row; 7] = [
            ("/", b"", 0, 0, 4, 0, 0, 0, 1, 0, 0, 3),
            (
                "/c",
                b"cdata",
                2,
                2,
                3,
                1796007018951,
                1796007018951,
                0,
                1,
                0,
                container,
                1,
            ),
            (
                "/c/k",
                b"kid121",
                3,
                128,
                3,
                1796007018978,
                1796007023899,
                122,
                0,
                0,
                0,
                0,
            ),
            (
                "/t",
                b"tt",
                4,
                4,
                4,
                1796007019004,
                1796007019004,
                0,
                0,
                0,
                ttl,
                0,
            ),
            ("/zookeeper", b"", 0, 0, 0, 0, 0, 0, -2, 0, 0, 2),
            ("/zookeeper/config", b"", 0, 0, 0, 0, 0, 0, 0, -1, 0, 0),
            ("/zookeeper/quota", b"", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        ];
        assert_eq!(digest_of(&rows), 11_259_261_650);
    }

    #[test]
    fn node_digest_is_crc32_of_path_data_and_stat() {
        // Null and empty data hash alike; "/" hashes as ""; /zookeeper/ children are skipped.
        let blank = Meta::default();
        assert_eq!(
            node_digest("/", None, &blank),
            node_digest("/", Some(&[]), &blank)
        );
        assert_eq!(node_digest("/zookeeper/quota", None, &blank), 0);
        assert_ne!(node_digest("/zookeeper", None, &blank), 0);
        // The root of a fresh tree: CRC-32 of 60 zero bytes (Python's `zlib.crc32(bytes(60))`).
        assert_eq!(node_digest("/", None, &blank), 0x0412_8908);
    }
}
