//! Transcripts: what a scenario observed, normalized so that two servers can be compared.
//!
//! A transcript is an ordered list of lines, each a sequence of tokens. Values that legitimately
//! differ between servers are normalized at [`Transcript::finish`]:
//! - zxids become `z<rank>`, their rank among all zxids the transcript saw (so order and
//!   equality are compared, not absolute values — Apache's zxids include other tests' writes);
//! - times appear only as relations (`ctime==mtime`), rendered when the line is recorded;
//! - session ids become the symbolic names given at registration (`s1`, `s2`, …);
//! - the scenario's unique root path becomes `/R`.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

/// One token of a line.
#[derive(Debug, Clone)]
pub enum Tok {
    /// Literal text.
    T(String),
    /// A zxid, replaced by its rank.
    Z(i64),
}

/// Builds a line.
#[derive(Debug, Default, Clone)]
pub struct Line(pub Vec<Tok>);

impl Line {
    pub fn text(mut self, s: impl Into<String>) -> Self {
        self.0.push(Tok::T(s.into()));
        self
    }
    pub fn push_text(&mut self, s: impl Into<String>) {
        self.0.push(Tok::T(s.into()));
    }
    pub fn push_zxid(&mut self, z: i64) {
        self.0.push(Tok::Z(z));
    }
}

/// The recording.
#[derive(Debug)]
pub struct Transcript {
    root: String,
    lines: Vec<Line>,
    sessions: HashMap<i64, String>,
    /// Bytes that `zkit-proto` could not round-trip (decode then re-encode to the same bytes):
    /// not part of the comparison, reported on their own.
    pub codec_findings: Vec<String>,
}

/// A transcript shared by the clients of one scenario (never locked across an await).
pub type Shared = Arc<Mutex<Transcript>>;

impl Transcript {
    pub fn new(root: String) -> Self {
        Self {
            root,
            lines: Vec::new(),
            sessions: HashMap::new(),
            codec_findings: Vec::new(),
        }
    }

    pub fn push(&mut self, line: Line) {
        self.lines.push(line);
    }

    pub fn note(&mut self, s: impl Into<String>) {
        self.lines.push(Line::default().text(s));
    }

    /// Number of lines so far.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Removes the lines from index `from` on and returns them rendered with every zxid as
    /// `z*` (ranks are only meaningful over a whole transcript) and the root as `/R`.
    pub fn take_from(&mut self, from: usize) -> Vec<String> {
        let taken = self.lines.split_off(from.min(self.lines.len()));
        self.render(&taken, |s, _| s.push_str("z*"))
    }

    /// `lines` as text, each zxid written by `zxid` and the root as `/R`.
    fn render(&self, lines: &[Line], zxid: impl Fn(&mut String, i64)) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                let mut s = String::new();
                for t in &l.0 {
                    match t {
                        Tok::T(t) => s.push_str(t),
                        Tok::Z(z) => zxid(&mut s, *z),
                    }
                }
                s.replace(&self.root, "/R")
            })
            .collect()
    }

    /// Names a session id (`s1`, `s2`, … in order of first registration).
    pub fn register_session(&mut self, id: i64) -> String {
        let n = self.sessions.len() + 1;
        self.sessions
            .entry(id)
            .or_insert_with(|| format!("s{n}"))
            .clone()
    }

    /// The symbolic name of a session id as it appears in ephemeralOwner and whoAmI.
    pub fn session_name(&self, id: i64) -> String {
        match id {
            0 => "0".into(),
            id => self
                .sessions
                .get(&id)
                .cloned()
                .unwrap_or_else(|| "foreign-session".into()),
        }
    }

    /// The normalized lines.
    pub fn finish(&self) -> Vec<String> {
        let zxids: BTreeSet<i64> = self
            .lines
            .iter()
            .flat_map(|l| l.0.iter())
            .filter_map(|t| match t {
                Tok::Z(z) => Some(*z),
                Tok::T(_) => None,
            })
            .collect();
        let rank: HashMap<i64, usize> =
            zxids.into_iter().enumerate().map(|(i, z)| (z, i)).collect();
        self.render(&self.lines, |s, z| {
            let _ = write!(s, "z{}", rank[&z]);
        })
    }
}

/// Compares two finished transcripts; `Err` carries a readable diff: the common lines for
/// context, `- apache:` for lines only Apache produced, `+ zkit:` for lines only zkit did
/// (a longest-common-subsequence alignment, so one extra line does not shift the rest).
pub fn compare(apache: &[String], zkit: &[String]) -> Result<(), String> {
    if apache == zkit {
        return Ok(());
    }
    let (n, m) = (apache.len(), zkit.len());
    // lcs[i][j] = length of the LCS of apache[i..] and zkit[j..]. Transcripts are a few
    // hundred lines, so the quadratic table is small.
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if apache[i] == zkit[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = String::from(
        "transcripts differ ('- apache:' only in Apache's, '+ zkit:' only in zkit's)\n",
    );
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && apache[i] == zkit[j] {
            let _ = writeln!(out, "           {}", apache[i]);
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            let _ = writeln!(out, "  + zkit:   {}", zkit[j]);
            j += 1;
        } else {
            let _ = writeln!(out, "  - apache: {}", apache[i]);
            i += 1;
        }
    }
    Err(out)
}
