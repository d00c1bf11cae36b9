//! Rules of the codebase, checked on every test run so that they stay kept:
//! - no file under `crates/*/src` is longer than 900 lines (split a file by concern before it
//!   gets there);
//! - no crate has an import cycle between its files (`scripts/import-cycles` finds them; it
//!   needs python3, which CI has);
//! - nothing under `crates/` or `docs/` points at documents the repository does not hold: a
//!   numbered seed document (`seed 0NN`) or a tracker entry (`issue N`, `issue #N`). Write the
//!   explanation itself, or a `docs/` page.
//!
//! Pure file reading (and one python3 process): a fraction of a second.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Longest file allowed under `crates/*/src`.
const MAX_LINES: usize = 900;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// Every file under `dir`, recursively, skipping build output and hidden entries.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => files_under(&path, out),
            Ok(t) if t.is_file() => out.push(path),
            _ => {}
        }
    }
}

/// The `src` directory of every crate.
fn crate_sources(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .expect("crates/")
        .filter_map(Result::ok)
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn no_source_file_is_over_900_lines() {
    let root = workspace_root();
    let sources = crate_sources(&root);
    assert!(sources.len() >= 5, "found only {sources:?} under crates/");
    let mut files = Vec::new();
    for src in &sources {
        files_under(src, &mut files);
    }
    let mut long = Vec::new();
    for file in &files {
        let bytes = fs::read(file).expect("a source file");
        let lines = bytes.split(|b| *b == b'\n').count() - usize::from(bytes.ends_with(b"\n"));
        if lines > MAX_LINES {
            long.push(format!("{}: {lines} lines", relative(&root, file)));
        }
    }
    assert!(files.len() > 100, "only {} files scanned", files.len());
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by concern):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_import_cycle_between_files_of_a_crate() {
    let root = workspace_root();
    let script = root.join("scripts/import-cycles");
    let output = Command::new("python3")
        .arg(&script)
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "scripts/import-cycles found import cycles ({}):\n{stdout}{stderr}",
        output.status
    );
    assert!(
        stdout.contains("no import cycles"),
        "unexpected output of scripts/import-cycles:\n{stdout}{stderr}"
    );
}

/// The reference `line` makes to a document outside the repository, if any: `seed 0` and two
/// digits, or `issue ` with an optional `#` and a digit (case-insensitive).
fn outside_reference(line: &str) -> Option<&str> {
    let lower = line.to_ascii_lowercase();
    let b = lower.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    for (i, _) in lower.match_indices("seed 0") {
        if digit(i + 6) && digit(i + 7) {
            return Some(&line[i..i + 8]);
        }
    }
    for (i, _) in lower.match_indices("issue ") {
        let mut j = i + 6;
        if b.get(j) == Some(&b'#') {
            j += 1;
        }
        if digit(j) {
            return Some(&line[i..=j]);
        }
    }
    None
}

#[test]
fn outside_references_are_recognized() {
    // Built from pieces, so that this file does not hold what it looks for.
    let seed = concat!("see the se", "ed 004 notes");
    let issue = concat!("fixed in Iss", "ue #12");
    let plain = concat!("iss", "ue 7 of the tracker");
    assert_eq!(outside_reference(seed), Some(&seed[8..16]));
    assert!(outside_reference(issue).is_some());
    assert!(outside_reference(plain).is_some());
    for fine in [
        "a seed of 0x10",
        "seed 0 is the default",
        "the issue is the order",
        "issue #a",
    ] {
        assert_eq!(outside_reference(fine), None, "{fine}");
    }
}

#[test]
fn no_reference_to_documents_outside_the_repository() {
    let root = workspace_root();
    let mut files = Vec::new();
    files_under(&root.join("crates"), &mut files);
    files_under(&root.join("docs"), &mut files);
    assert!(files.len() > 100, "only {} files scanned", files.len());
    let mut found = Vec::new();
    for file in &files {
        let Ok(bytes) = fs::read(file) else {
            continue;
        };
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue; // not text
        };
        for (no, line) in text.lines().enumerate() {
            if let Some(what) = outside_reference(line) {
                found.push(format!("{}:{}: {what}", relative(&root, file), no + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "references to documents the repository does not hold (write the explanation itself, \
         or a docs/ page):\n{}",
        found.join("\n")
    );
}
