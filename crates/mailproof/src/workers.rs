//! Several claim loops of one background queue, run at once in one task: while one loop's job
//! waits on a slow outside host, the others take the next jobs (the store's fair claims decide
//! whose, and keep one account from taking every loop).

use std::future::Future;
use std::time::Duration;

use tokio::sync::{watch, Notify};

/// One queue's loops: how many, what they are called, and when they look again.
pub struct Loops<'a> {
    /// Names the loops' leases (`serve::worker_id(name)` and `-{n}`) and their log lines.
    pub name: &'static str,
    pub workers: usize,
    /// Woken when work is queued in this process; `None`: polling alone.
    pub ready: Option<&'a Notify>,
    /// How often an idle loop looks at the queue without a wake-up.
    pub poll: Duration,
}

impl Loops<'_> {
    /// Runs the loops until `stop` changes. Each calls `one(worker)` while it returns true
    /// (a job was done), then waits for a wake-up, the poll interval or the stop.
    pub async fn run<F, Fut>(self, stop: watch::Receiver<bool>, one: F)
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = anyhow::Result<bool>>,
    {
        let prefix = crate::serve::worker_id(self.name);
        let loops = (0..self.workers.max(1)).map(|n| {
            let worker = format!("{prefix}-{n}");
            let mut stop = stop.clone();
            let one = &one;
            let name = self.name;
            let (ready, poll) = (self.ready, self.poll);
            async move {
                loop {
                    match one(worker.clone()).await {
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err(e) => tracing::error!(queue = name, error = %e, "background job failed; will retry"),
                    }
                    let woken = async {
                        match ready {
                            Some(ready) => ready.notified().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = woken => {}
                        _ = tokio::time::sleep(poll) => {}
                        _ = stop.changed() => return,
                    }
                }
            }
        });
        futures::future::join_all(loops).await;
    }
}
