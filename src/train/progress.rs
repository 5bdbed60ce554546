//! A progress bar for long training runs: redrawn in place on a terminal, a
//! line per tenth of the run otherwise (a log stays short).

use std::io::{IsTerminal, Write};

/// Writes `[=====     ] done/total label` to standard error.
#[derive(Clone, Copy, Debug)]
pub struct ProgressBar {
    tty: bool,
}

impl Default for ProgressBar {
    fn default() -> ProgressBar {
        ProgressBar::new()
    }
}

impl ProgressBar {
    /// A bar on standard error, redrawn in place when it is a terminal.
    pub fn new() -> ProgressBar {
        ProgressBar { tty: std::io::stderr().is_terminal() }
    }

    /// Shows `done` of `total` steps with `label` after the counts; the bar
    /// ends its line when `done == total`.
    pub fn show(&self, done: usize, total: usize, label: &str) {
        let line = format!("[{:<30}] {done}/{total} {label}", "=".repeat(30 * done.min(total) / total.max(1)));
        let mut err = std::io::stderr().lock();
        // a closed stderr is not worth failing a training run for
        let _ = if self.tty {
            write!(err, "\r{line}{}", if done >= total { "\n" } else { "" })
        } else if done >= total || done.is_multiple_of((total / 10).max(1)) {
            writeln!(err, "{line}")
        } else {
            Ok(())
        };
        let _ = err.flush();
    }
}
