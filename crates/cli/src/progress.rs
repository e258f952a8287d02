//! Progress on a terminal: one bar per phase (submit, screenshots n/N, spam filters n/N, download,
//! compare) on stderr. When stderr is not a terminal (CI logs) the bars are hidden and each phase
//! prints one plain line when it ends.

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress {
    multi: Option<MultiProgress>,
}

impl Progress {
    pub fn new() -> Progress {
        let multi = std::io::stderr()
            .is_terminal()
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Progress { multi }
    }

    /// A phase counting to `len`, or a spinner when the count is not known yet.
    pub fn phase(&self, name: &'static str, len: Option<u64>) -> Phase {
        let bar = self.multi.as_ref().map(|m| {
            let bar = m.add(match len {
                Some(n) => ProgressBar::new(n),
                None => ProgressBar::new_spinner(),
            });
            let template = if len.is_some() {
                "{prefix:>12} [{bar:30}] {pos}/{len} {msg}"
            } else {
                "{prefix:>12} {spinner} {msg}"
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(name);
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Phase { name, bar }
    }

    /// Removes the bars before the report is printed.
    pub fn clear(&self) {
        if let Some(m) = &self.multi {
            let _ = m.clear();
        }
    }
}

pub struct Phase {
    name: &'static str,
    bar: Option<ProgressBar>,
}

impl Phase {
    pub fn set_length(&self, len: u64) {
        if let Some(b) = &self.bar {
            if b.length() != Some(len) {
                b.set_length(len);
                if let Ok(style) =
                    ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {msg}")
                {
                    b.set_style(style.progress_chars("=> "));
                }
            }
        }
    }

    pub fn set_position(&self, pos: u64) {
        if let Some(b) = &self.bar {
            b.set_position(pos);
        }
    }

    pub fn set_message(&self, msg: impl Into<String>) {
        if let Some(b) = &self.bar {
            b.set_message(msg.into());
        }
    }

    /// Ends the phase with a short summary (the plain log line when stderr is no terminal).
    pub fn finish(self, msg: impl Into<String>) {
        let msg = msg.into();
        match &self.bar {
            Some(b) => b.finish_with_message(msg),
            None => eprintln!("mailproof check: {}: {msg}", self.name),
        }
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        // A phase left by an error must not keep ticking over the error message.
        if let Some(b) = &self.bar {
            if !b.is_finished() {
                b.abandon();
            }
        }
    }
}
