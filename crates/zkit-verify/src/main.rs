//! The `zkit-verify` binary.
fn main() {}
