//! [`ChildGuard`]: a helper process (a demo's or a benchmark's bookie, writer, ...) that is
//! killed with SIGKILL and reaped when dropped, so an early return or a panic does not leave it
//! running.

use std::io;
use std::process::{Child, Command, ExitStatus};

/// A child process killed with SIGKILL and reaped when dropped.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
}

impl ChildGuard {
    /// Spawns `command` and guards the child.
    ///
    /// # Errors
    /// When spawning fails.
    pub fn spawn(command: &mut Command) -> io::Result<ChildGuard> {
        Ok(ChildGuard {
            child: command.spawn()?,
        })
    }

    /// The guarded child, e.g. to take its stdout.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Kills the child with SIGKILL now (unless it has exited) and returns its exit status.
    ///
    /// # Errors
    /// When waiting for the child fails.
    pub fn kill9(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.child.try_wait()? {
            return Ok(status);
        }
        // InvalidInput: it exited between try_wait and kill; wait() reaps it either way.
        match self.child.kill() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
            Err(e) => return Err(e),
        }
        self.child.wait()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}
