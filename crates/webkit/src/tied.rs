//! Child processes that die with the service: started under `setpriv --pdeathsig KILL` from one
//! thread that lives as long as the process, so a `kill -9` of the service takes its browsers,
//! helpers and Xvfb with it at once instead of leaving them to notice on their own.
//!
//! The render crate starts its browsers through here too; this crate is the lowest one both share.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::{mpsc, Mutex, OnceLock};

use tokio::sync::oneshot;

/// A command that runs `program` with a parent-death signal when util-linux's `setpriv` exists
/// (it execs the program, so the child's pid is the program's), else `program` itself.
pub fn command(program: &Path) -> Command {
    match setpriv() {
        Some(setpriv) => {
            let mut c = Command::new(setpriv);
            c.args(["--pdeathsig", "KILL", "--"]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

fn setpriv() -> Option<&'static Path> {
    let path = Path::new("/usr/bin/setpriv");
    path.is_file().then_some(path)
}

/// Spawns `command` from the launcher thread. The parent-death signal fires when the *thread*
/// that forked the child ends, so children must not be forked from short-lived threads (a test's
/// thread, a blocking-pool thread).
pub async fn spawn(command: Command) -> std::io::Result<Child> {
    type Job = (Command, oneshot::Sender<std::io::Result<Child>>);
    static LAUNCHER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("child-launcher".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the child launcher thread");
        }
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = oneshot::channel();
    let sent = launcher
        .lock()
        .map_err(|_| std::io::Error::other("child launcher lock poisoned"))?
        .send((command, reply_tx));
    if sent.is_err() {
        return Err(std::io::Error::other("the child launcher thread is gone"));
    }
    reply_rx
        .await
        .map_err(|_| std::io::Error::other("the child launcher thread dropped the request"))?
}
