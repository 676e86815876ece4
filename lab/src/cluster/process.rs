//! The nodes as processes: start on their data dirs, signal, wait, stop, kill, by pid file
//! (never by name); zombies are reaped, a reused pid is told apart by its command line.

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use electd_client::{Mode, NodeId};
use rustix::process::{self, Pid, Signal};

use super::dir::{io, Cluster, CtlError};

impl Cluster {
    /// The pid of node `id` if its process is alive (a zombie counts as dead and is reaped).
    /// A main thread that is a zombie while other threads of the process still exit is alive:
    /// those threads still hold its files, its listening socket included (a node started
    /// again on the same address at that moment could not bind it).
    pub fn pid(&self, id: NodeId) -> Option<i32> {
        let pid: i32 = fs::read_to_string(self.pid_file(id))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        process_state(pid)
            .filter(|s| *s != 'Z' || threads(pid) > 1)
            .map(|_| pid)
    }

    /// Starts node `id` in `mode` on its data dir, unless it is already running.
    pub fn start(&self, id: NodeId, mode: Mode) -> Result<i32, CtlError> {
        if let Some(pid) = self.pid(id) {
            return Ok(pid);
        }
        let m = self.member(id)?;
        let mode_file = self.run.join("mode");
        fs::write(&mode_file, mode.as_str()).map_err(io(&mode_file))?;
        let data = self.data_dir(mode, id);
        fs::create_dir_all(&data).map_err(io(&data))?;
        let log_path = self.log_file(id);
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io(&log_path))?;
        let err = log.try_clone().map_err(io(&log_path))?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--config")
            .arg(&m.config)
            .arg("--mode")
            .arg(mode.as_str())
            .arg("--data-dir")
            .arg(&data)
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        if let Ok(secret) = fs::read_to_string(self.run.join("cluster-secret")) {
            cmd.env("ELECTD_CLUSTER_SECRET", secret.trim());
        }
        if let Some(token) = self.admin_token() {
            cmd.env("ELECTD_ADMIN_TOKEN", token);
        }
        if let Some(url) = self.store_url() {
            cmd.env("ELECTD_STORE_URL", url);
        }
        if let Some(ca) = self.tls_ca() {
            let (cert, key) = self.tls_files(id);
            cmd.env("ELECTD_TLS_CA", ca)
                .env("ELECTD_TLS_CERT", cert)
                .env("ELECTD_TLS_KEY", key);
        }
        // Own process group: a Ctrl-C in the shell that ran `up` does not reach the nodes.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        if self.die_with_parent {
            let parent = Pid::from_raw(std::process::id() as i32);
            // SAFETY: runs in the child between fork and exec: the two calls are plain system
            // calls (rustix, no libc state), and the error is built without allocating.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                    process::set_parent_process_death_signal(Some(Signal::KILL))?;
                    // The parent may have died before the death signal was armed.
                    if process::getppid() != parent {
                        return Err(std::io::ErrorKind::Other.into());
                    }
                    Ok(())
                });
            }
        }
        if let Some(&bytes) = self.small_disks.get(&id) {
            own_tmpfs(&mut cmd, &data, bytes)?;
        }
        self.with_wall_clock(id, &mut cmd)?;
        let child = cmd.spawn().map_err(io(&self.bin))?;
        let pid = child.id() as i32;
        let pid_path = self.pid_file(id);
        fs::write(&pid_path, format!("{pid}\n")).map_err(io(&pid_path))?;
        // The child is reaped by `pid()` (waitpid) or by init once we exit.
        std::mem::forget(child);
        Ok(pid)
    }

    /// `path` inside node `id`'s data dir as the node sees it (its own mounts: see
    /// [`Cluster::small_disks`]), while it runs.
    pub fn disk_path(&self, id: NodeId, path: &str) -> Option<std::path::PathBuf> {
        let pid = self.pid(id)?;
        let data = self.data_dir(self.mode(), id);
        let inside = data.strip_prefix("/").unwrap_or(&data).join(path);
        Some(std::path::Path::new(&format!("/proc/{pid}/root")).join(inside))
    }

    /// Node `id`'s process ended while its pid file still names it (a stop or a kill by this
    /// process removes the file): how it ended (`exit status 101`, `killed by signal 6 (ABORT)`, or
    /// `ended` when another process reaped it). `None` while it runs or once it was stopped.
    pub fn exited(&self, id: NodeId) -> Option<String> {
        let pid: i32 = fs::read_to_string(self.pid_file(id))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        if self.pid(id).is_some() {
            return None;
        }
        let seen = EXITS.lock().expect("exits").get(&pid).cloned();
        Some(seen.unwrap_or_else(|| "ended".into()))
    }

    /// Sends `sig` to node `id`; `false` if it is not running.
    pub fn signal(&self, id: NodeId, sig: Signal) -> bool {
        match self.pid(id).and_then(Pid::from_raw) {
            Some(pid) => process::kill_process(pid, sig).is_ok(),
            None => false,
        }
    }

    /// Waits at most `limit` for node `id` to exit; removes its pid file once it has.
    pub fn wait_exit(&self, id: NodeId, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if self.pid(id).is_none() {
                let _ = fs::remove_file(self.pid_file(id));
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// SIGKILL, then wait until gone and its address can be bound again.
    pub fn kill(&self, id: NodeId) -> bool {
        let sent = self.signal(id, Signal::KILL);
        if self.wait_exit(id, Duration::from_secs(5)) {
            self.wait_address_free(id, Duration::from_secs(5));
        }
        sent
    }

    /// Waits until node `id`'s address can be bound as the node binds it (`SO_REUSEADDR`, as
    /// std and tokio set it), at most `limit`: now and then a killed node's address is still
    /// taken a moment after its process is gone, and the node started again at once exits
    /// ("cannot listen on ...: Address already in use"; CI on 3ed567a).
    fn wait_address_free(&self, id: NodeId, limit: Duration) {
        let addr = self.member(id).ok().and_then(|m| m.addr.parse().ok());
        let Some(addr) = addr else { return };
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if std::net::TcpListener::bind::<std::net::SocketAddr>(addr).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, wait at most `grace`, then SIGKILL what is left.
    pub fn stop(&self, id: NodeId, grace: Duration) -> bool {
        if !self.signal(id, Signal::TERM) {
            let _ = fs::remove_file(self.pid_file(id));
            return false;
        }
        // A paused process cannot act on SIGTERM.
        self.signal(id, Signal::CONT);
        if !self.wait_exit(id, grace) {
            self.kill(id);
        }
        true
    }

    /// Deletes every node's data dir (each mode's) and log: for a stopped cluster, to start
    /// over.
    pub fn wipe(&self) -> Result<(), CtlError> {
        let data = self.run.join("data");
        match fs::remove_dir_all(&data) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&data)(e)),
            _ => {}
        }
        for m in &self.members {
            let _ = fs::remove_file(self.log_file(m.id));
        }
        Ok(())
    }

    /// Stops every node: SIGTERM to all, then SIGKILL to what is left after `grace`.
    pub fn down(&self, grace: Duration) {
        for m in &self.members {
            if self.signal(m.id, Signal::TERM) {
                self.signal(m.id, Signal::CONT);
            }
        }
        let until = Instant::now() + grace;
        for m in &self.members {
            let left = until.saturating_duration_since(Instant::now());
            if !self.wait_exit(m.id, left) {
                self.kill(m.id);
            }
            let _ = fs::remove_file(self.pid_file(m.id));
        }
    }
}

/// The state letter of a process from /proc (R, S, T, Z…), reaping it if it is our zombie.
/// How many threads of process `pid` are left (0 when it is gone).
fn threads(pid: i32) -> usize {
    fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// How the node processes this process reaped ended, by pid: what [`Cluster::exited`] tells of
/// a node that died by itself.
static EXITS: std::sync::Mutex<std::collections::BTreeMap<i32, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// How a wait status reads: `exit status 101`, `killed by signal 6 (ABORT)`.
fn describe_status(status: process::WaitStatus) -> String {
    if let Some(code) = status.exit_status() {
        format!("exit status {code}")
    } else if let Some(sig) = status.terminating_signal() {
        let name = Signal::from_named_raw(sig).map_or("?".into(), |s| {
            let debug = format!("{s:?}");
            debug
                .trim_matches('"')
                .trim_start_matches("Signal::")
                .to_string()
        });
        format!("killed by signal {sig} ({name})")
    } else {
        format!("{status:?}")
    }
}

pub(super) fn process_state(pid: i32) -> Option<char> {
    // Reaps it if it is our exited child (recording how it ended); harmless if it is not ours.
    if let Ok(Some((_, status))) =
        process::waitpid(Some(Pid::from_raw(pid)?), process::WaitOptions::NOHANG)
    {
        EXITS
            .lock()
            .expect("exits")
            .insert(pid, describe_status(status));
    }
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Format: pid (comm) S ...; comm may contain spaces, so split after the last ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())?;
    let cmd = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    // A zombie main thread has no command line any more (its other threads may still run).
    if state != 'Z' && !String::from_utf8_lossy(&cmd).contains("electd") {
        return None; // the pid was reused by another program
    }
    Some(state)
}

/// Makes `cmd` start in a mount namespace of its own with a tmpfs of `bytes` on `data`: the
/// mount is the child's alone and goes with it. Needs root (`CAP_SYS_ADMIN`).
fn own_tmpfs(cmd: &mut Command, data: &std::path::Path, bytes: u64) -> Result<(), CtlError> {
    use rustix::mount::{mount, mount_change, MountFlags, MountPropagationFlags};
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |s: &[u8]| CString::new(s).map_err(|e| CtlError::Usage(e.to_string()));
    let target = c(data.as_os_str().as_bytes())?;
    let options = c(format!("size={bytes}").as_bytes())?;
    let (root, tmpfs) = (c(b"/")?, c(b"tmpfs")?);
    // SAFETY: runs in the child between fork and exec, which has one thread: unsharing its
    // mount namespace affects no other thread. Every argument was made before the fork, so
    // nothing here allocates.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS)?;
            mount_change(
                root.as_c_str(),
                MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
            )?;
            mount(
                tmpfs.as_c_str(),
                target.as_c_str(),
                tmpfs.as_c_str(),
                MountFlags::empty(),
                Some(options.as_c_str()),
            )?;
            Ok(())
        });
    }
    Ok(())
}
