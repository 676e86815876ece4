//! Everything `electd run` started, daemons included, ends within the claim: what CMD starts
//! in its process group goes with the group, but a worker that forks, calls `setsid` and forks
//! again (nginx, `redis --daemonize yes`, many init scripts) leaves the group, and a signal to
//! the group no longer reaches it. Two ways keep it in reach, as systemd (`KillMode=
//! control-group`) and tini or s6 (`PR_SET_CHILD_SUBREAPER`) do:
//!
//! - **A cgroup of its own** (cgroup v2), where the host lets the supervisor make one under its
//!   own (root, or a delegated subtree): CMD enters it before it execs, every descendant is
//!   born into it, and `cgroup.kill` kills them all at once, also from the keeper when the
//!   supervisor itself was killed.
//! - **A subreaper, in any case**: the supervisor marks itself `PR_SET_CHILD_SUBREAPER`, so a
//!   daemon orphaned by its double fork is re-parented to the supervisor, not to init, and is
//!   found among the supervisor's descendants (`/proc`) and killed with the group. (Without a
//!   cgroup, a daemon that outlives a killed supervisor is re-parented to init and escapes:
//!   the keeper kills only the group. docs/applications.md, "electd run", says so.)
//!
//! The supervisor says at start which one a run uses.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use rustix::process::{Pid, Signal};

/// How one run keeps CMD's descendants in reach.
pub struct Containment {
    /// CMD's cgroup (v2), when the host allows one.
    cgroup: Option<PathBuf>,
    /// Whether this process is a child subreaper.
    subreaper: bool,
}

impl Containment {
    /// Marks this process a subreaper, and makes a cgroup for the child of the supervisor
    /// with pid `me` if the host allows it.
    pub fn new() -> Containment {
        let me = rustix::process::getpid();
        let subreaper = rustix::process::set_child_subreaper(Some(me)).is_ok();
        let cgroup = own_cgroup_dir().and_then(|dir| {
            let mine = dir.join(format!("electd-run-{}", me.as_raw_nonzero()));
            match fs::create_dir(&mine) {
                Ok(()) => Some(mine),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Some(mine),
                Err(_) => None,
            }
        });
        Containment { cgroup, subreaper }
    }

    /// Which ways this run uses, for its log.
    pub fn describe(&self) -> String {
        match (&self.cgroup, self.subreaper) {
            (Some(c), true) => format!("cgroup {} (cgroup.kill) and subreaper", c.display()),
            (Some(c), false) => format!("cgroup {} (cgroup.kill)", c.display()),
            (None, true) => "subreaper only (no cgroup v2 this process may make)".into(),
            (None, false) => "the process group only (no cgroup, no subreaper)".into(),
        }
    }

    /// The cgroup's directory, if any (the keeper is told it).
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }

    /// `cgroup.procs` of the child's cgroup opened for writing, for the child to write itself
    /// into between fork and exec (the file is opened close-on-exec).
    pub fn procs_file(&self) -> Option<File> {
        let c = self.cgroup.as_ref()?;
        fs::OpenOptions::new()
            .write(true)
            .open(c.join("cgroup.procs"))
            .ok()
    }

    /// `sig` to every process of the child's cgroup and to every descendant of this process
    /// but those in `spare` (the keeper); with SIGKILL, the cgroup's `cgroup.kill`. Answers how
    /// many processes outside CMD's group it signalled (daemons).
    pub fn signal_all(&self, sig: Signal, group: Option<Pid>, spare: &[i32]) -> usize {
        if let Some(c) = &self.cgroup {
            if sig == Signal::KILL {
                let _ = fs::write(c.join("cgroup.kill"), "1");
            } else {
                for pid in cgroup_pids(c) {
                    signal(pid, sig);
                }
            }
        }
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let group = group.map(|g| g.as_raw_nonzero().get());
        let mut outside = 0;
        for p in descendants(me) {
            if spare.contains(&p.pid) {
                continue;
            }
            if group != Some(p.pgid) {
                outside += 1;
            }
            signal(p.pid, sig);
        }
        outside
    }

    /// Reaps the descendants re-parented to this subreaper that have exited, but `spare` (CMD,
    /// whose status tokio reaps, and the keeper).
    pub fn reap_orphans(&self, spare: &[i32]) {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        for p in descendants(me) {
            if p.ppid == me && p.state == 'Z' && !spare.contains(&p.pid) {
                if let Some(pid) = Pid::from_raw(p.pid) {
                    let _ =
                        rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
                }
            }
        }
    }

    /// Whether nothing of the child's is left: its cgroup empty, and no descendant of this
    /// process but `spare`.
    pub fn empty(&self, spare: &[i32]) -> bool {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let cgroup_empty = self
            .cgroup
            .as_ref()
            .is_none_or(|c| cgroup_pids(c).is_empty());
        cgroup_empty
            && descendants(me)
                .iter()
                .all(|p| spare.contains(&p.pid) || p.state == 'Z')
    }

    /// Removes the child's cgroup (once empty; a cgroup with processes stays).
    pub fn remove(&self) {
        if let Some(c) = &self.cgroup {
            let _ = fs::remove_dir(c);
        }
    }
}

/// The cgroup (v2) directory of this process: the `cgroup2` mount and the path of the `0::`
/// line of `/proc/self/cgroup`.
fn own_cgroup_dir() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Fields: id parent major:minor root mount-point options ... - fstype source options.
    let mount = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2").then(|| left.split_whitespace().nth(4))?
    })?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(Path::new(mount).join(path.trim_start_matches('/')))
}

/// The pids in cgroup `dir`.
fn cgroup_pids(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn signal(pid: i32, sig: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// One process as `/proc/PID/stat` tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub state: char,
}

/// Parses `/proc/PID/stat`: `pid (comm) S ppid pgrp …`, the command name possibly holding
/// spaces and parentheses (split after the last `)`).
pub fn parse_stat(text: &str) -> Option<Proc> {
    let (head, rest) = text.rsplit_once(')')?;
    let pid = head.split_once('(')?.0.trim().parse().ok()?;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgid = f.next()?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        pgid,
        state,
    })
}

/// Every process descended from `root` (not `root` itself), read from `/proc`.
pub fn descendants(root: i32) -> Vec<Proc> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let procs: Vec<Proc> = dir
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|t| parse_stat(&t))
        .collect();
    let mut children: BTreeMap<i32, Vec<Proc>> = BTreeMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut out = Vec::new();
    let mut seen = BTreeSet::from([root]);
    let mut next = vec![root];
    while let Some(pid) = next.pop() {
        for c in children.get(&pid).into_iter().flatten() {
            if seen.insert(c.pid) {
                out.push(*c);
                next.push(c.pid);
            }
        }
    }
    out
}

/// The keeper's last act when its supervisor is gone: kill the cgroup, if the run has one.
pub fn kill_cgroup(dir: &Path) {
    let _ = fs::write(dir.join("cgroup.kill"), "1");
    // Removed once empty, at most two seconds later.
    for _ in 0..200 {
        if cgroup_pids(dir).is_empty() {
            let _ = fs::remove_dir(dir);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_and_parentheses_in_its_name_is_read() {
        let p = parse_stat("4242 (my (odd) worker) S 17 4242 4242 0 -1").unwrap();
        assert_eq!(
            p,
            Proc {
                pid: 4242,
                ppid: 17,
                pgid: 4242,
                state: 'S'
            }
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_found_among_its_parents_descendants() {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let parent = rustix::process::getppid().unwrap().as_raw_nonzero().get();
        assert!(descendants(parent).iter().any(|p| p.pid == me));
    }
}
