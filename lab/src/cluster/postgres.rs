//! A PostgreSQL server of the lab's own, for mutex mode: one per cluster, in a data directory
//! of its own, listening on an address of its cluster's own (never the system's instance or
//! port). As root it runs as the `postgres` user (PostgreSQL refuses root). It is stopped, and
//! its directory removed, when the value is dropped.
//!
//! The nodes reach it as `postgres://electd:PASSWORD@IP:PORT/electd` (a role and a database
//! made at start, password authentication over TCP); the cluster hands them that URL in
//! `run/store-url` ([`Postgres::url`]).

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

/// The role and the database the nodes use.
pub const STORE_USER: &str = "electd";
pub const STORE_DB: &str = "electd";

/// The port of a test or chaos cluster's store, on its own loopback address.
pub const BLOCK_STORE_PORT: u16 = 7432;

/// A running (or stopped) PostgreSQL server of the lab.
pub struct Postgres {
    bin: PathBuf,
    /// The server's directory: `data/` and the Unix socket; removed when dropped if `owned`.
    dir: PathBuf,
    owned: bool,
    ip: String,
    port: u16,
    password: String,
    /// Root: the uid and gid of the `postgres` user the server runs as.
    run_as: Option<(u32, u32)>,
    /// The server gets SIGKILL when the thread that started it exits (tests, the chaos
    /// runner); `ctl up` leaves this off.
    die_with_parent: bool,
    child: Option<Child>,
    /// The server runs under this libfaketime, its wall clock offset by the file
    /// [`Postgres::wall_clock_file`] (chaos S22: the store's clock steps).
    faketime: Option<PathBuf>,
}

/// The directory of PostgreSQL's programs (`initdb`, `postgres`), or why there is none.
pub fn bin_dir() -> Result<PathBuf, String> {
    let mut found: Vec<PathBuf> = fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| "PostgreSQL is not installed (no /usr/lib/postgresql)".to_string())?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists() && b.join("postgres").exists())
        .collect();
    found.sort();
    found
        .pop()
        .ok_or_else(|| "PostgreSQL is not installed (no initdb under /usr/lib/postgresql)".into())
}

/// The processes whose parent is `pid`, from `/proc`.
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| {
            // `pid (comm) state ppid …`: the comm may hold spaces, so read after its ')'.
            fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|st| {
                    let rest = st.rsplit_once(')')?.1;
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// The uid and gid of `user`, from `/etc/passwd`.
fn ids_of(user: &str) -> Option<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&user) && f.len() > 3)
            .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
            .flatten()
    })
}

impl Postgres {
    /// Makes a new server in a directory of its own under the system's temp dir (removed when
    /// dropped; the `postgres` user must reach it), listening on `ip:port`, with the role and
    /// database of the nodes; starts it. With `die_with_parent` the server dies with the
    /// thread that started it.
    pub fn create(ip: &str, port: u16, die_with_parent: bool) -> Result<Postgres, String> {
        Self::create_with_clock(ip, port, die_with_parent, None)
    }

    /// As [`Postgres::create`], the server under `faketime` (libfaketime) when given: its wall
    /// clock (what `clock_timestamp()` reads) moves with [`Postgres::set_wall_clock`].
    pub fn create_with_clock(
        ip: &str,
        port: u16,
        die_with_parent: bool,
        faketime: Option<PathBuf>,
    ) -> Result<Postgres, String> {
        let bin = bin_dir()?;
        let root = rustix::process::geteuid().is_root();
        let run_as = if root {
            Some(ids_of("postgres").ok_or("running as root, and there is no postgres user")?)
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix("electd-store-")
            .tempdir()
            .map_err(|e| format!("store dir: {e}"))?
            .keep();
        let mut password = [0u8; 12];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut password);
        let mut pg = Postgres {
            bin,
            dir,
            owned: true,
            ip: ip.to_string(),
            port,
            password: hex::encode(password),
            run_as,
            die_with_parent,
            child: None,
            faketime,
        };
        if pg.faketime.is_some() {
            pg.set_wall_clock(0)?;
        }
        pg.init()?;
        pg.start()?;
        pg.make_role_and_db()?;
        Ok(pg)
    }

    /// The URL the nodes use.
    pub fn url(&self) -> String {
        format!(
            "postgres://{STORE_USER}:{}@{}:{}/{STORE_DB}",
            self.password, self.ip, self.port
        )
    }

    /// `ip:port` the server listens on.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    /// The postmaster's pid while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// A command of PostgreSQL's, run as the server's user; with `die_with_parent`, it gets
    /// SIGKILL when the thread that started it exits (set after the change of user, which
    /// would clear it).
    fn command(&self, program: &str) -> Command {
        self.command_with_env(program, &[])
    }

    /// As [`Postgres::command`], with `env` set for `program` alone (through `env(1)` after
    /// `setpriv`, so that a preloaded library reaches the server, not `setpriv`, which runs as
    /// root).
    fn command_with_env(&self, program: &str, env: &[(&str, String)]) -> Command {
        let path = self.bin.join(program);
        let pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        match self.run_as {
            Some((uid, gid)) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups");
                if self.die_with_parent {
                    c.arg("--pdeathsig=SIGKILL");
                }
                c.arg("--");
                if !pairs.is_empty() {
                    c.arg("env").args(&pairs);
                }
                c.arg(path);
                c
            }
            None => {
                let mut c = Command::new(path);
                c.envs(env.iter().map(|(k, v)| (k, v)));
                if self.die_with_parent {
                    // SAFETY: runs in the child between fork and exec: one plain system call
                    // (rustix, no libc state, no allocation).
                    unsafe {
                        std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
                            Ok(())
                        });
                    }
                }
                c
            }
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// `initdb`: trust over the Unix socket (for the lab's own setup), passwords over TCP.
    fn init(&self) -> Result<(), String> {
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(&self.dir, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", self.dir.display()))?;
        }
        let out = self
            .command("initdb")
            .arg("-D")
            .arg(self.data())
            .args([
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        // The nodes connect from their own loopback addresses (127.A.B.x), not 127.0.0.1.
        let hba = self.data().join("pg_hba.conf");
        let mut text = fs::read_to_string(&hba).map_err(|e| format!("pg_hba.conf: {e}"))?;
        text.push_str("host all all 127.0.0.0/8 scram-sha-256\n");
        fs::write(&hba, text).map_err(|e| format!("pg_hba.conf: {e}"))?;
        Ok(())
    }

    /// The file that holds the server's wall-clock offset (when it runs under libfaketime).
    fn wall_clock_file(&self) -> PathBuf {
        self.dir.join("wallclock")
    }

    /// Sets the server's wall clock `offset_s` seconds from the host's, from its next read on
    /// (written aside and renamed over, so that it never reads half of it; readable by the
    /// server's user).
    pub fn set_wall_clock(&self, offset_s: i64) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.wall_clock_file();
        let tmp = path.with_extension("tmp");
        fs::write(&tmp, format!("{offset_s:+}\n")).map_err(|e| format!("store clock: {e}"))?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644))
            .map_err(|e| format!("store clock: {e}"))?;
        fs::rename(&tmp, &path).map_err(|e| format!("store clock: {e}"))
    }

    /// How far the server's wall clock is from this host's, in seconds, as the server reads it.
    pub fn wall_clock_offset_s(&self) -> Result<f64, String> {
        let before = std::time::SystemTime::now();
        let theirs: f64 = self
            .sql("SELECT extract(epoch FROM clock_timestamp())")?
            .parse()
            .map_err(|e| format!("store clock: {e}"))?;
        let mine = before
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| format!("host clock: {e}"))?
            .as_secs_f64();
        Ok(theirs - mine)
    }

    /// Starts the server (again) on its data directory and waits until it takes connections
    /// (at most 20 s).
    pub fn start(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Ok(());
        }
        let log = fs::File::create(self.dir.join("postgres.log"))
            .map_err(|e| format!("store log: {e}"))?;
        // Under libfaketime, as the lab's nodes (cluster/wallclock.rs): the wall clock only,
        // read again on every read.
        let faked: Vec<(&str, String)> = match &self.faketime {
            Some(lib) => vec![
                ("LD_PRELOAD", lib.display().to_string()),
                (
                    "FAKETIME_TIMESTAMP_FILE",
                    self.wall_clock_file().display().to_string(),
                ),
                ("FAKETIME_NO_CACHE", "1".into()),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
                ("NO_FAKE_STAT", "1".into()),
            ],
            None => Vec::new(),
        };
        let mut cmd = self.command_with_env("postgres", &faked);
        cmd.arg("-D")
            .arg(self.data())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(&self.dir)
            .args([
                "-c",
                &format!("listen_addresses={}", self.ip),
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "shared_buffers=16MB",
                "-c",
                "max_connections=40",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        // fsync off (the lab's disks need not survive a power cut), but every commit is
        // written to the OS before it is answered (synchronous_commit stays on): a killed
        // server must not lose an answered renewal, or a term would be handed out twice.
        // A group of its own: the postmaster's backends go with it.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().map_err(|e| format!("postgres: {e}"))?;
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(20);
        let addr = format!("{}:{}", self.ip, self.port);
        loop {
            // Accepting connections, not merely listening: a starting server listens first
            // and refuses every session ("the database system is starting up") until its
            // recovery is done (pg_isready: 0 accepting, 1 rejecting, 2 no answer).
            let ready = self
                .command("pg_isready")
                .arg("-h")
                .arg(&self.dir)
                .args(["-p", &self.port.to_string(), "-q", "-t", "1"])
                .stdin(Stdio::null())
                .status()
                .map_err(|e| format!("pg_isready: {e}"))?;
            if ready.success() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                let log = fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default();
                return Err(format!("postgres exited ({status}): {log}"));
            }
            if Instant::now() > until {
                return Err(format!(
                    "postgres did not accept connections on {addr} within 20 s"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A `psql` of the server's superuser on database `db`, running `sql` (tuples only,
    /// unaligned, stopping at the first error).
    fn psql_command(&self, db: &str, sql: &str) -> Command {
        let mut cmd = self.command("psql");
        cmd.arg("-h")
            .arg(&self.dir)
            .args(["-p", &self.port.to_string(), "-U", "postgres", "-d", db])
            .args(["-v", "ON_ERROR_STOP=1", "-q", "-t", "-A", "-c", sql])
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `sql` as the server's superuser in the nodes' database and returns its output
    /// (what an operator does by hand: delete the row, look at it).
    pub fn sql(&self, sql: &str) -> Result<String, String> {
        run_psql(self.psql_command(STORE_DB, sql), sql)
    }

    /// Starts `sql` in a session of its own, in the background (e.g. a transaction that holds
    /// the row locked for a while); the caller waits for it.
    pub fn sql_in_background(&self, sql: &str) -> Result<std::process::Child, String> {
        let mut cmd = self.psql_command(STORE_DB, sql);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        cmd.spawn().map_err(|e| format!("psql: {e}"))
    }

    /// The nodes' role (with its password) and database.
    fn make_role_and_db(&self) -> Result<(), String> {
        let psql = |sql: &str| run_psql(self.psql_command("postgres", sql), sql).map(drop);
        psql(&format!(
            "CREATE ROLE {STORE_USER} LOGIN PASSWORD '{}'",
            self.password
        ))?;
        psql(&format!("CREATE DATABASE {STORE_DB} OWNER {STORE_USER}"))
    }

    /// Sends `sig` to the server and to every process it started: each of PostgreSQL's
    /// processes makes a session of its own, so a signal to the postmaster's group reaches
    /// the postmaster alone.
    fn signal_all(&self, sig: Signal) {
        let Some(pid) = self.pid() else { return };
        for p in std::iter::once(pid).chain(children_of(pid)) {
            if let Some(p) = Pid::from_raw(p) {
                let _ = rustix::process::kill_process(p, sig);
            }
        }
    }

    /// SIGKILL to the server and its backends (a crash of the store); waits until it is gone.
    pub fn kill(&mut self) {
        self.signal_all(Signal::KILL);
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }

    /// SIGSTOP to the server and every process of it (a frozen store).
    pub fn pause(&self) {
        self.signal_all(Signal::STOP);
    }

    /// SIGCONT.
    pub fn resume(&self) {
        self.signal_all(Signal::CONT);
    }

    /// Fast shutdown (SIGINT), SIGKILL after 5 s.
    pub fn stop(&mut self) {
        self.signal_all(Signal::CONT);
        self.signal_all(Signal::INT);
        let until = Instant::now() + Duration::from_secs(5);
        while let Some(c) = self.child.as_mut() {
            if matches!(c.try_wait(), Ok(Some(_))) || Instant::now() > until {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }
}

impl Postgres {
    /// Lets the server run on after this process ends (`electd-lab ctl up`): its pid and
    /// directory, for [`stop_detached`].
    pub fn detach(mut self) -> (Option<i32>, PathBuf) {
        let pid = self.pid();
        self.child = None;
        self.owned = false;
        (pid, self.dir.clone())
    }
}

/// Stops a server that [`Postgres::detach`] let run on (SIGINT to its group, SIGKILL after
/// 5 s) and removes its directory. A pid whose process is not that server's is left alone.
pub fn stop_detached(pid: i32, dir: &std::path::Path) {
    let ours = fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .map(|c| c.contains("postgres") && c.contains(&*dir.to_string_lossy()))
        .unwrap_or(false);
    if let (true, Some(p)) = (ours, Pid::from_raw(pid)) {
        for c in children_of(pid).into_iter().filter_map(Pid::from_raw) {
            let _ = rustix::process::kill_process(c, Signal::CONT);
        }
        let _ = rustix::process::kill_process_group(p, Signal::CONT);
        let _ = rustix::process::kill_process_group(p, Signal::INT);
        let until = Instant::now() + Duration::from_secs(5);
        while std::path::Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = rustix::process::kill_process_group(p, Signal::KILL);
    }
    if dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("electd-store-"))
    {
        let _ = fs::remove_dir_all(dir);
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
        if self.owned {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs a prepared `psql` and returns its output, or its error naming `sql`.
fn run_psql(mut cmd: Command, sql: &str) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
