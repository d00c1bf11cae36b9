//! Client-side path rules: [`validate_path`] (Apache's `PathUtils.validatePath`, which the Java
//! client runs before sending anything) and [`Chroot`], which turns client paths into server
//! paths and back, as `ZooKeeper.prependChroot` and `ClientCnxn.SendThread.stripChroot` do.
//!
//! Pure string work: no I/O.

use std::sync::Arc;

use crate::error::{Error, Result};

/// Checks `path` as `PathUtils.validatePath(path, sequential)` does: absolute, no trailing
/// `/` (except the root), no empty, `.` or `..` segment, no NUL or other characters ZooKeeper
/// refuses. A sequential create's path may end with `/` (the server appends the number).
///
/// # Errors
/// [`Error::BadArguments`] naming the rule broken.
pub fn validate_path(path: &str, sequential: bool) -> Result<()> {
    let bytes = path.as_bytes();
    if bytes.is_empty() {
        return Err(Error::bad_arguments("path must not be empty"));
    }
    if bytes[0] != b'/' {
        return Err(Error::bad_arguments("path must start with /"));
    }
    if bytes.len() == 1 {
        return Ok(());
    }
    if bytes[bytes.len() - 1] == b'/' && !sequential {
        return Err(Error::bad_arguments("path must not end with /"));
    }
    // Segment by segment: a sequential path's trailing empty segment stands for the number.
    let body = &path[1..];
    let segments: Vec<&str> = body.split('/').collect();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        if segment.is_empty() && !(last && sequential) {
            return Err(Error::bad_arguments("empty node name in path"));
        }
        // "." and ".." are refused only as whole segments; a sequential "x/." becomes "x/.1".
        if (*segment == "." || *segment == "..") && !(last && sequential) {
            return Err(Error::bad_arguments("relative paths not allowed"));
        }
        if let Some(c) = segment.chars().find(|&c| invalid_char(c)) {
            return Err(if c == '\0' {
                Error::bad_arguments("null character not allowed in path")
            } else {
                Error::bad_arguments("invalid character in path")
            });
        }
    }
    Ok(())
}

/// Characters `PathUtils.validatePath` refuses. Java works on UTF-16 units and refuses
/// `\ud800-\uf8ff`: the surrogates (so every character outside the BMP) and the private use area.
fn invalid_char(c: char) -> bool {
    c == '\0'
        || ('\u{1}'..='\u{1f}').contains(&c)
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || ('\u{e000}'..='\u{f8ff}').contains(&c)
        || c >= '\u{fff0}'
}

/// A client's root: `/app` for a connect string ending in `/app`; empty for none. Cheap to clone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Chroot(Option<Arc<str>>);

impl Chroot {
    /// A root from a connect string's or [`crate::Client::chroot`]'s path; `/` is no root.
    pub(crate) fn new(root: &str) -> Result<Chroot> {
        validate_path(root, false)?;
        Ok(if root == "/" {
            Chroot(None)
        } else {
            Chroot(Some(root.into()))
        })
    }

    /// The root path, `""` when there is none.
    #[cfg(test)]
    pub(crate) fn root(&self) -> &str {
        self.0.as_deref().unwrap_or("")
    }

    /// The root as a client would name it: `/` when there is none.
    pub(crate) fn path(&self) -> &str {
        self.0.as_deref().unwrap_or("/")
    }

    /// This root followed by `path` (itself relative to this root).
    pub(crate) fn join(&self, path: &str) -> Result<Chroot> {
        validate_path(path, false)?;
        Ok(Chroot(match (&self.0, path) {
            (root, "/") => root.clone(),
            (None, path) => Some(path.into()),
            (Some(root), path) => Some(format!("{root}{path}").into()),
        }))
    }

    /// The server path for a validated client path: `prependChroot`.
    pub(crate) fn server_path(&self, path: &str) -> String {
        match (&self.0, path) {
            (None, path) => path.to_owned(),
            (Some(root), "/") => root.to_string(),
            (Some(root), path) => format!("{root}{path}"),
        }
    }

    /// Length of the server path, for encoding it without building it.
    pub(crate) fn server_path_len(&self, path: &str) -> usize {
        match (&self.0, path) {
            (None, path) => path.len(),
            (Some(root), "/") => root.len(),
            (Some(root), path) => root.len() + path.len(),
        }
    }

    /// The bytes of the server path, in two parts (root, rest).
    pub(crate) fn server_path_parts<'a>(&'a self, path: &'a str) -> (&'a str, &'a str) {
        match (&self.0, path) {
            (None, path) => ("", path),
            (Some(root), "/") => (root, ""),
            (Some(root), path) => (root, path),
        }
    }

    /// The client path for a server path, `None` when it is not under this root. Unlike Java's
    /// `stripChroot` (a plain `startsWith`), `/apple` is not under `/app`.
    pub(crate) fn client_path(&self, server_path: &str) -> Option<String> {
        let Some(root) = &self.0 else {
            return Some(server_path.to_owned());
        };
        let rest = server_path.strip_prefix(&**root)?;
        if rest.is_empty() {
            Some("/".to_owned())
        } else if rest.starts_with('/') {
            Some(rest.to_owned())
        } else {
            None
        }
    }

    /// As [`Chroot::client_path`], but a path outside the root (which a server only sends for
    /// `/zookeeper/...` nodes) is returned unchanged, as Java's `stripChroot` does.
    pub(crate) fn client_path_or_same(&self, server_path: String) -> String {
        match self.client_path(&server_path) {
            Some(path) => path,
            None => server_path,
        }
    }
}

/// The parent of an absolute path (`/` for `/a`, `None` for `/`).
pub(crate) fn parent(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_like_path_utils() {
        for ok in ["/", "/a", "/a/b", "/a.b", "/..a", "/a/...", "/é", "/a b"] {
            assert_eq!(validate_path(ok, false), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/./b",
            "/a/../b",
            "/a\0",
            "/a\u{1}",
            "/\u{7f}",
            "/\u{e000}",
            "/\u{fff0}",
            "/\u{1F600}",
        ] {
            assert!(
                matches!(validate_path(bad, false), Err(Error::BadArguments(_))),
                "{bad:?}"
            );
        }
        // A sequential path may end in '/', the number becomes the name.
        assert_eq!(validate_path("/a/", true), Ok(()));
        assert_eq!(validate_path("/a/.", true), Ok(()));
        assert!(validate_path("/a//", true).is_err());
    }

    #[test]
    fn chroot_maps_both_ways() {
        let none = Chroot::new("/").unwrap();
        assert_eq!(none.server_path("/x"), "/x");
        assert_eq!(none.client_path("/x").as_deref(), Some("/x"));
        let app = Chroot::new("/app").unwrap();
        assert_eq!(app.server_path("/"), "/app");
        assert_eq!(app.server_path("/x"), "/app/x");
        assert_eq!(app.server_path_len("/x"), 6);
        assert_eq!(app.client_path("/app").as_deref(), Some("/"));
        assert_eq!(app.client_path("/app/x").as_deref(), Some("/x"));
        assert_eq!(app.client_path("/apple"), None);
        assert_eq!(
            app.client_path_or_same("/zookeeper/config".into()),
            "/zookeeper/config"
        );
        let nested = app.join("/b").unwrap();
        assert_eq!(nested.root(), "/app/b");
        assert_eq!(app.join("/").unwrap(), app);
        assert!(Chroot::new("app").is_err());
    }

    #[test]
    fn parents() {
        assert_eq!(parent("/"), None);
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/a/b"), Some("/a"));
    }
}
