//! Progress of long commands on stderr: a live bar on a terminal (indicatif), one plain line
//! per step when stderr is a pipe or a file (logs and tests read those). Results stay on
//! stdout either way.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::conn::human_duration;

/// The steps of one long command.
pub struct Progress {
    label: String,
    total: u64,
    started_steps: u64,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A command of `total` steps; a live bar if stderr is a terminal.
    pub fn new(label: &str, total: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            let style = ProgressStyle::with_template(
                "{prefix} [{bar:24}] {pos}/{len} {elapsed:>4} {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(label.to_string());
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            label: label.to_string(),
            total,
            started_steps: 0,
            started: Instant::now(),
            bar,
        }
    }

    /// Starts the next step (the previous one counts as done).
    pub fn step(&mut self, what: &str) {
        self.started_steps += 1;
        match &self.bar {
            Some(bar) => {
                bar.set_position(self.started_steps - 1);
                bar.set_message(what.to_string());
            }
            None => eprintln!(
                "{}: {}/{} {what} (at {})",
                self.label,
                self.started_steps,
                self.total,
                human_duration(self.started.elapsed())
            ),
        }
    }

    /// Prints a result line on stdout, above the bar on a terminal.
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| println!("{line}")),
            None => println!("{line}"),
        }
    }

    /// Every step done: the bar goes; a plain line says how long it all took.
    pub fn finish(self) {
        match &self.bar {
            Some(bar) => bar.finish_and_clear(),
            None => eprintln!(
                "{}: done in {}",
                self.label,
                human_duration(self.started.elapsed())
            ),
        }
    }
}
