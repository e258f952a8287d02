//! Other processes as mailproof sees them: which processes descend from one (a browser's
//! renderers, the WebKit helper's web processes, the service's engines), how much memory they
//! hold, whether one still runs, and signals to one process or its whole process group.
//!
//! `/proc` is read through `procfs` and signals are sent through `rustix`: nothing else in the
//! workspace walks `/proc` or forks `/bin/kill`. Every function is best effort: a process that
//! ends while it is being read is simply left out.

use procfs::process::Process;
pub use rustix::process::Signal;
use rustix::process::{kill_process, kill_process_group, Pid};

/// Every process below `roots` (children, grandchildren, ...), without the roots themselves.
pub fn descendants(roots: &[u32]) -> Vec<u32> {
    let parent_of: Vec<(u32, u32)> = procfs::process::all_processes()
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|p| {
            let stat = p.stat().ok()?;
            Some((
                u32::try_from(stat.pid).ok()?,
                u32::try_from(stat.ppid).ok()?,
            ))
        })
        .collect();
    let mut found = Vec::new();
    let mut frontier = roots.to_vec();
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid) in &parent_of {
            if ppid == parent && !found.contains(&pid) && !roots.contains(&pid) {
                found.push(pid);
                frontier.push(pid);
            }
        }
    }
    found
}

/// `pid` followed by all its descendants.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    all.extend(descendants(&[pid]));
    all
}

/// Summed resident set size of `pids`, in bytes (shared pages counted once per process).
pub fn rss_bytes(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|&pid| process(pid)?.status().ok()?.vmrss)
        .map(|kb| kb * 1024)
        .sum()
}

/// The command name (`comm`) of `pid` while it runs; `None` once it has exited, even while it is
/// a zombie not yet reaped.
pub fn live_command(pid: u32) -> Option<String> {
    let stat = process(pid)?.stat().ok()?;
    (!matches!(stat.state, 'Z' | 'X')).then_some(stat.comm)
}

/// Whether `pid` runs (a zombie does not).
pub fn alive(pid: u32) -> bool {
    live_command(pid).is_some()
}

/// Every running process whose command line contains all of `parts`.
pub fn with_command_line(parts: &[&str]) -> Vec<u32> {
    procfs::process::all_processes()
        .into_iter()
        .flatten()
        .flatten()
        .filter(|p| {
            p.cmdline()
                .is_ok_and(|args| parts.iter().all(|part| args.join(" ").contains(part)))
        })
        .filter_map(|p| u32::try_from(p.pid).ok())
        .collect()
}

/// Sends `signal` to `pid`; whether it was delivered.
pub fn signal(pid: u32, signal: Signal) -> bool {
    pid_of(pid).is_some_and(|pid| kill_process(pid, signal).is_ok())
}

/// Sends `signal` to every process of the group led by `leader` (a child spawned with
/// `process_group(0)`, and everything it started that stayed in its group); whether it was
/// delivered.
pub fn signal_group(leader: u32, signal: Signal) -> bool {
    pid_of(leader).is_some_and(|pid| kill_process_group(pid, signal).is_ok())
}

fn process(pid: u32) -> Option<Process> {
    Process::new(i32::try_from(pid).ok()?).ok()
}

fn pid_of(pid: u32) -> Option<Pid> {
    // Pid 0 or a negative value would address a group or every process: never meant here.
    Pid::from_raw(i32::try_from(pid).ok()?)
}

/// This process's real user id (for messages that name the user a file must be readable by).
pub fn own_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn this_process_tree_starts_with_itself_and_has_memory() {
        let me = std::process::id();
        let tree = tree(me);
        assert_eq!(tree.first(), Some(&me));
        assert!(rss_bytes(&tree) > 0);
        assert!(alive(me));
    }

    #[test]
    fn a_grandchild_is_a_descendant_and_a_group_signal_ends_both() {
        use std::os::unix::process::CommandExt as _;
        let marker = format!("procs-test-{}", rand_marker());
        // sh starts a sleep (the grandchild) and waits; both share the new process group.
        let mut child = Command::new("sh")
            .args(["-c", &format!("sleep 30 & wait # {marker}")])
            .process_group(0)
            .stdin(Stdio::null())
            .spawn()
            .expect("sh runs");
        let sh = child.id();
        // Until it execs, the forked child is still named `sh`.
        let is_sleep = |p: &u32| live_command(*p).as_deref() == Some("sleep");
        wait_until("sleep to start under sh", || {
            descendants(&[sh]).iter().any(is_sleep)
        });
        let below = descendants(&[sh]);
        assert!(!below.contains(&sh), "the root is not its own descendant");
        assert!(below.iter().any(is_sleep), "{below:?}");
        assert_eq!(with_command_line(&[&marker]), vec![sh]);

        assert!(signal_group(sh, Signal::KILL));
        let _ = child.wait();
        wait_until("the grandchild to die with its group", || {
            !below.iter().any(|&p| alive(p))
        });
        assert!(!alive(sh));
        assert!(
            !signal(sh, Signal::TERM),
            "a reaped process takes no signal"
        );
    }

    #[test]
    fn a_single_signal_reaches_only_its_process() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = child.id();
        assert!(alive(pid));
        assert!(signal(pid, Signal::TERM));
        let status = child.wait().expect("wait");
        assert!(
            !status.success(),
            "sleep ended by the signal, not by itself"
        );
        assert!(!alive(pid));
    }

    fn rand_marker() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    }
}
