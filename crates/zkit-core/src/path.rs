//! ZooKeeper path rules: `PathUtils.validatePath` and the parent/name split used by
//! `PrepRequestProcessor`. Pure string functions; they know nothing about the tree.

/// The special paths that always exist and cannot be deleted (`DataTree.isSpecialPath`).
pub const SPECIAL_PATHS: [&str; 4] = ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

/// `/zookeeper`, the system subtree.
pub const PROC_PATH: &str = "/zookeeper";
/// `/zookeeper/quota`.
pub const QUOTA_PATH: &str = "/zookeeper/quota";
/// `/zookeeper/config`, the dynamic-config node (empty data in standalone).
pub const CONFIG_PATH: &str = "/zookeeper/config";

/// Whether `path` is one of [`SPECIAL_PATHS`].
pub fn is_special(path: &str) -> bool {
    SPECIAL_PATHS.contains(&path)
}

/// Why a path is invalid (the message of Apache's `IllegalArgumentException`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPath(pub String);

/// Checks a path exactly like Apache's `PathUtils.validatePath`: absolute, no trailing `/`
/// (except the root), no empty segment, no `.` or `..` segment, no NUL, and none of the
/// characters it rejects (U+0001–U+001F, U+007F–U+009F, U+D800–U+F8FF, U+FFF0–U+FFFF).
/// Java strings are UTF-16: a character outside the BMP is a surrogate pair, which falls in the
/// rejected D800–DFFF range, so any such character is rejected too.
pub fn validate_path(path: &str) -> Result<(), InvalidPath> {
    if path.is_empty() {
        return Err(InvalidPath("Path length must be > 0".into()));
    }
    if !path.starts_with('/') {
        return Err(InvalidPath("Path must start with / character".into()));
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err(InvalidPath("Path must not end with / character".into()));
    }
    if plainly_valid(path.as_bytes()) {
        return Ok(());
    }
    validate_chars(path)
}

/// The common case, on bytes: every character printable ASCII (none that the rules reject)
/// and every segment non-empty and neither `.` nor `..`. True only for paths the full check
/// accepts; anything else goes to [`validate_chars`], which also says why it is invalid.
/// `path` starts with `/`.
fn plainly_valid(path: &[u8]) -> bool {
    path[1..].split(|&b| b == b'/').all(|segment| {
        !matches!(segment, b"" | b"." | b"..") && segment.iter().all(|b| (b' '..=b'~').contains(b))
    })
}

/// The character-by-character check of [`validate_path`] after its length, leading- and
/// trailing-slash checks, with Apache's message for the first bad character.
fn validate_chars(path: &str) -> Result<(), InvalidPath> {
    // One pass without collecting the characters: the checks look one character back
    // (`lastc`), two back (`prev2`, only after a '.' that follows a '.') and one ahead.
    let mut chars = path.chars().peekable();
    chars.next(); // the leading '/'
    let (mut prev2, mut lastc) = ('/', '/');
    let mut i = 0usize;
    while let Some(c) = chars.next() {
        i += 1;
        let next_is_end_or_slash = matches!(chars.peek(), None | Some('/'));
        let bad = if c == '\0' {
            Some("null character not allowed")
        } else if c == '/' && lastc == '/' {
            Some("empty node name specified")
        } else if c == '.' && lastc == '.' {
            (prev2 == '/' && next_is_end_or_slash).then_some("relative paths not allowed")
        } else if c == '.' {
            (lastc == '/' && next_is_end_or_slash).then_some("relative paths not allowed")
        } else if ('\u{1}'..='\u{1f}').contains(&c)
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || ('\u{e000}'..='\u{f8ff}').contains(&c)
            || ('\u{fff0}'..='\u{ffff}').contains(&c)
            || u32::from(c) > 0xffff
        {
            Some("invalid character")
        } else {
            None
        };
        if let Some(reason) = bad {
            return Err(InvalidPath(format!(
                "Invalid path string \"{path}\" caused by {reason} @{i}"
            )));
        }
        prev2 = lastc;
        lastc = c;
    }
    Ok(())
}

/// The parent of `path` as `PrepRequestProcessor` computes it (`path.substring(0, lastSlash)`),
/// with Apache's root alias `""` mapped to `"/"`. `None` when there is no `/` at all.
pub fn parent_of(path: &str) -> Option<&str> {
    // A plain scan from the end: paths are short, and `rfind`'s set-up costs more than it
    // saves on them.
    let i = path.bytes().rposition(|b| b == b'/')?;
    Some(if i == 0 { "/" } else { &path[..i] })
}

/// The last segment of `path` (after the last `/`).
pub fn name_of(path: &str) -> &str {
    path.rfind('/').map_or(path, |i| &path[i + 1..])
}

/// `path` and its ancestors up to `/`, nearest first (the order of Apache's
/// `PathParentIterator`).
pub fn self_and_ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let cur = next?;
        next = if cur == "/" || cur.is_empty() {
            None
        } else {
            parent_of(cur)
        };
        Some(cur)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_paths() {
        for p in [
            "/", "/a", "/a/b", "/a.b", "/...", "/a/..b", "/a/b.", "/ä", "/a b", "/\u{a0}",
        ] {
            assert_eq!(validate_path(p), Ok(()), "{p}");
        }
    }

    #[test]
    fn invalid_paths() {
        for p in [
            "",
            "a",
            "a/b",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/.",
            "/a/..",
            "/./a",
            "/../a",
            "/a\0",
            "/a\u{1}",
            "/a\u{1f}",
            "/\u{7f}",
            "/\u{9f}",
            "/\u{e000}",
            "/\u{f8ff}",
            "/\u{fff0}",
            "/\u{ffff}",
            "/\u{1f600}",
        ] {
            assert!(validate_path(p).is_err(), "{p:?}");
        }
    }

    #[test]
    fn the_ascii_fast_path_accepts_exactly_what_the_full_check_accepts() {
        // Every string of up to 5 characters over an alphabet of the characters the rules
        // single out, each starting with '/' (the fast path's precondition).
        let alphabet = ['/', '.', 'a', ' ', '~', '\u{1}', '\u{7f}', 'é', '\0'];
        let mut paths = vec![String::from("/")];
        let mut last = paths.clone();
        for _ in 0..5 {
            last = last
                .iter()
                .flat_map(|p| alphabet.iter().map(move |c| format!("{p}{c}")))
                .collect();
            paths.extend(last.iter().cloned());
        }
        let mut fast = 0;
        for p in paths.iter().filter(|p| p.len() > 1 && !p.ends_with('/')) {
            let full = validate_chars(p).is_ok();
            if plainly_valid(p.as_bytes()) {
                fast += 1;
                assert!(full, "the fast path accepts {p:?}, the full check does not");
            }
            assert_eq!(validate_path(p).is_ok(), full, "{p:?}");
        }
        assert!(fast > 1000, "the fast path took only {fast} paths");
    }

    #[test]
    fn invalid_paths_name_the_character_index_as_java_does() {
        // PathUtils.validatePath reports the index in the (UTF-16) string: characters, not bytes.
        let at = |p: &str| validate_path(p).unwrap_err().0;
        assert!(
            at("/ab/\u{1}").ends_with("caused by invalid character @4"),
            "{}",
            at("/ab/\u{1}")
        );
        assert!(at("/ä/\u{1}").ends_with("@3"), "{}", at("/ä/\u{1}"));
        assert!(at("/a/../b").ends_with("caused by relative paths not allowed @4"));
        assert!(at("/a//b").ends_with("caused by empty node name specified @3"));
    }

    #[test]
    fn parents() {
        assert_eq!(parent_of("/a"), Some("/"));
        assert_eq!(parent_of("/a/b"), Some("/a"));
        assert_eq!(parent_of("/a/"), Some("/a"));
        assert_eq!(parent_of("/"), Some("/"));
        assert_eq!(parent_of("a"), None);
        assert_eq!(name_of("/a/b"), "b");
        let v: Vec<_> = self_and_ancestors("/a/b/c").collect();
        assert_eq!(v, ["/a/b/c", "/a/b", "/a", "/"]);
        assert_eq!(self_and_ancestors("/").collect::<Vec<_>>(), ["/"]);
    }
}
