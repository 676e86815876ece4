//! `electd run -- CMD [ARGS…]`: a supervisor, in a process of its own beside the node, that
//! runs CMD only while its node holds the claim (docs/applications.md, "electd run").
//!
//! It follows the node's `GET /v1/watch` stream and asks the node `GET /v1/claim` at once on
//! every event (so that CMD starts within milliseconds of the claim), and every `--poll-ms`
//! besides, which renews the promise and is the backstop when the stream is down. Every
//! answer that claims is a promise:
//! the node's claim lasts at least from the instant the question was *sent* until that instant
//! plus the `lease_ms` that came back, whatever happens to the node or the network after. The
//! child's deadline is the end of the latest promise *of its own term*; an answer in a new term
//! never extends it. What to do and when is decided by [`Plan`], a state machine fed with the
//! answers and the clock; the supervisor does the I/O:
//! - CMD gets SIGTERM `--grace-ms` before its deadline unless a newer answer renewed it, and
//!   SIGKILL [`KILL_EARLY_MS`] before the deadline, by a timer set for that instant (not on the
//!   next poll), so it never outlives the promise even when the node is paused, killed or
//!   unreachable;
//! - when the node answers that it no longer claims (or claims in a new term), CMD gets
//!   SIGTERM at once and SIGKILL `--grace-ms` later, never after its deadline;
//! - every signal goes to CMD's whole process group, so what CMD started in its group stops
//!   with it; when CMD exits by itself, what is left of its group is killed; and to what left
//!   the group (a daemon's double fork): CMD runs in a cgroup of its own where the host
//!   allows it, and the supervisor is a subreaper in any case (`contain.rs`);
//! - a keeper process (`electd __keep-group`, [`keep_group`]) holds the read end of a pipe
//!   from the supervisor: when the supervisor dies (SIGKILL, the OOM killer), the pipe closes
//!   and the keeper kills CMD's group at once. CMD also gets SIGKILL from the kernel when the
//!   supervisor's thread dies (a parent-death signal), for the instant before the keeper runs.
//!
//! Deadlines are kept on `CLOCK_BOOTTIME`, as the node keeps its lease: a suspended host does
//! not stretch them. They are enforced on it too ([`BootClock`]: a BOOTTIME timerfd), so that a
//! deadline that passed while the host was suspended is enforced at resume, not a poll or a
//! MONOTONIC timer's remaining length later; a SIGKILL that goes out late says by how much.

use std::io::Read;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use electd::clock::{boot_ns, mono_ns, ms};
use electd_client::{Client, LeaderInfo, Mode, NodeId, Role, RoleClaimInfo, RoleName};
use futures_util::future::BoxFuture;
use rustix::process::{Pid, Signal};
use tokio::process::{Child, ChildStdin, Command};

use super::addr::NodeAddr;
use super::contain::Containment;
use super::health::{HealthArgs, Outcome};
#[cfg(doc)]
use super::plan::KILL_EARLY_MS;
use super::plan::{Action, Plan};

/// Exit codes of `electd run` besides the child's own.
pub mod exit {
    /// Stopped by SIGINT or SIGTERM (the child was stopped first).
    pub const STOPPED: u8 = 0;
    /// CMD could not be started (not found, not executable).
    pub const CANNOT_START: u8 = 127;
}

/// The clock the supervisor keeps and enforces deadlines on: the host's `CLOCK_BOOTTIME`
/// ([`HostBoot`]), or a test's.
pub trait BootClock: Send + Sync + 'static {
    /// Now, ns.
    fn now_ns(&self) -> u64;
    /// Resolves once this clock reaches `due_ns`, however it got there (a host suspend
    /// included).
    fn until(&self, due_ns: u64) -> BoxFuture<'static, ()>;
}

/// `CLOCK_BOOTTIME` of the host, its deadlines waited for on a BOOTTIME timerfd
/// ([`electd::clock::until_boot`]).
pub struct HostBoot;

impl BootClock for HostBoot {
    fn now_ns(&self) -> u64 {
        boot_ns()
    }
    fn until(&self, due_ns: u64) -> BoxFuture<'static, ()> {
        Box::pin(electd::clock::until_boot(due_ns))
    }
}

/// The line a SIGKILL is logged with: how long before its deadline it went out, or how late.
fn kill_note(deadline_ns: u64, now_ns: u64, deadline_mono: u64) -> String {
    let when = if now_ns <= deadline_ns {
        format!("{:.1} ms before", (deadline_ns - now_ns) as f64 / 1e6)
    } else {
        format!(
            "{:.1} ms AFTER (the supervisor ran late: a host suspend, a stall)",
            (now_ns - deadline_ns) as f64 / 1e6
        )
    };
    format!("SIGKILL to the child's group {when} its deadline (mono {deadline_mono})")
}

/// What to do when CMD exits by itself while the claim holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Restart {
    /// `electd run` exits with CMD's exit code.
    Never,
    /// Start CMD again (after `--restart-delay-ms`) when it failed; exit 0 when it succeeded.
    OnFailure,
    /// Start CMD again whatever its exit code.
    Always,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The node whose claim CMD runs under.
    #[command(flatten)]
    pub node: NodeAddr,
    /// SIGTERM this long before the deadline (unless renewed); SIGKILL at the deadline, ms.
    #[arg(long, value_name = "MS", default_value_t = 40)]
    pub grace_ms: u64,
    /// How often to ask the node, ms (well below its claim lease).
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub poll_ms: u64,
    /// When CMD exits by itself while the claim holds.
    #[arg(long, value_enum, default_value_t = Restart::OnFailure)]
    pub restart: Restart,
    /// Pause before CMD starts again after it exited by itself, ms.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub restart_delay_ms: u64,
    /// Run CMD under a named role rather than the cluster's own election: the node stands for
    /// NAME while this runs and withdraws when it exits; CMD runs only while the node holds
    /// NAME, with the grant's fencing token in ELECTD_TOKEN (quorum mode).
    #[arg(long, value_name = "NAME", value_parser = role_name)]
    pub role: Option<RoleName>,
    /// The admin token, for a node that is not on this host (its own host stands without one).
    #[arg(long, env = "ELECTD_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Candidacy that follows the application's health (with --role).
    #[command(flatten)]
    pub health: HealthArgs,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// `--role`'s value, or why it is not a role name.
fn role_name(s: &str) -> Result<RoleName, String> {
    RoleName::new(s).map_err(|e| e.to_string())
}

/// A role's claim answer read as the plan reads the cluster's: node `me`'s answer, claiming
/// (`holds`) in the "term" of the grant's token.
fn role_answer(me: NodeId, holds: bool, info: &RoleClaimInfo) -> LeaderInfo {
    LeaderInfo {
        // A 200 names its holder, the node that answered; a 503 the holder elsewhere.
        node_id: if holds { info.node.unwrap_or(me) } else { me },
        mode: Mode::Quorum,
        role: if holds { Role::Leader } else { Role::Follower },
        term: info.token.unwrap_or(0),
        leader: None,
        lease_ms: holds.then_some(info.lease_ms),
        no_promise: None,
    }
}

/// The running child: CMD, the leader of its own process group, and its keeper.
struct Running {
    child: Child,
    group: Option<Pid>,
    keeper: Option<Keeper>,
    /// How CMD's descendants are kept in reach (its cgroup, the subreaper).
    contain: std::sync::Arc<Containment>,
}

/// The keeper of one child's group, and the pipe whose end it watches.
struct Keeper {
    process: Child,
    pipe: ChildStdin,
}

/// How the supervisor stands.
struct Supervisor {
    args: RunArgs,
    client: Client,
    plan: Plan,
    running: Option<Running>,
    contain: std::sync::Arc<Containment>,
    /// Where deadlines are read and waited for.
    clock: std::sync::Arc<dyn BootClock>,
    /// With `--role`: the role, and the id of the node this supervisor follows.
    role: Option<(RoleName, NodeId)>,
    /// With `--role`: asks candidacy changes (answered once applied: longer than a poll).
    changes: Client,
    /// With `--health-cmd` or `--health-url`: each check's outcome.
    health: Option<tokio::sync::watch::Receiver<Option<Outcome>>>,
    /// Whether the node stands for the role (as this supervisor last had it applied).
    stood: bool,
    /// The last health check failed.
    unhealthy: bool,
    /// A candidacy change under way (withdraw and give up, or stand), on a task of its own so
    /// that the loop goes on enforcing deadlines meanwhile: whether the node stands after it.
    changing: Option<tokio::task::JoinHandle<bool>>,
}

fn log(line: &str) {
    eprintln!("electd run: {line}");
}

impl Running {
    /// `sig` to CMD's group, its cgroup and every other descendant of the supervisor (a
    /// daemon that left the group) but the keeper.
    fn signal(&self, sig: Signal) {
        if let Some(group) = self.group {
            let _ = rustix::process::kill_process_group(group, sig);
        }
        let outside = self.contain.signal_all(sig, self.group, &self.spare());
        if outside > 0 {
            log(&format!(
                "{sig:?} also to {outside} process(es) that left the child's group (daemons)"
            ));
        }
    }

    /// Pids that no signal of [`Running::signal`] is for, and whose status is not reaped here:
    /// CMD (tokio reaps it) and the keeper.
    fn spare(&self) -> Vec<i32> {
        [
            self.child.id(),
            self.keeper.as_ref().and_then(|k| k.process.id()),
        ]
        .into_iter()
        .flatten()
        .map(|p| p as i32)
        .collect()
    }

    /// The child is gone: what is left of it (its group, its cgroup, daemons re-parented to
    /// the supervisor) is killed and reaped, at most two seconds, its cgroup removed, and the
    /// keeper is let go (the closed pipe makes it kill the group again, which is then empty,
    /// and exit).
    async fn finish(mut self) {
        self.signal(Signal::KILL);
        for _ in 0..200 {
            self.contain.reap_orphans(&self.spare());
            if self.contain.empty(&self.spare()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.contain.remove();
        if let Some(k) = self.keeper.take() {
            drop(k.pipe);
            let mut p = k.process;
            let _ = tokio::time::timeout(Duration::from_secs(2), p.wait()).await;
        }
    }
}

/// Spawns the keeper of `group`: `electd __keep-group GROUP` (this binary), in a process
/// group of its own (a Ctrl-C meant for the supervisor does not reach it), reading a pipe
/// from the supervisor.
fn spawn_keeper(group: Pid, cgroup: Option<&std::path::Path>) -> Option<Keeper> {
    let exe = std::env::current_exe().ok()?;
    let mut process = Command::new(exe)
        .arg("__keep-group")
        .arg(group.as_raw_nonzero().to_string())
        .args(cgroup)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
        .map_err(|e| log(&format!("no keeper for the child's group: {e}")))
        .ok()?;
    let pipe = process.stdin.take()?;
    Some(Keeper { process, pipe })
}

impl Supervisor {
    /// One round: ask the node, then do what the plan says.
    async fn round(&mut self) -> Result<(), ExitCode> {
        let sent = self.clock.now_ns();
        // The question waits no longer than the next instant the deadline must be enforced.
        // (Not at all when that instant has come.)
        let bound = Duration::from_nanos(
            self.plan
                .due_ns()
                .map_or(u64::MAX, |d| d.saturating_sub(sent)),
        )
        .min(Duration::from_millis(self.args.poll_ms.max(1) * 2));
        let answer = tokio::time::timeout(bound, self.ask()).await;
        let now = self.clock.now_ns();
        match answer {
            Ok(Ok((_, mut info))) => {
                // While the health check fails, CMD neither starts nor goes on: a claim is
                // taken as a refusal.
                if self.unhealthy {
                    (info.role, info.lease_ms) = (Role::Follower, None);
                }
                let action = self.plan.answered(sent, now, &info);
                let why = if self.unhealthy {
                    "the health check fails".to_string()
                } else if self.plan.node.is_some_and(|n| n != info.node_id) {
                    format!(
                        "node {} answered, not node {} that this supervisor follows (is --node \
                         a load-balanced address? point it at the node beside the application)",
                        info.node_id,
                        self.plan.node.unwrap_or(0)
                    )
                } else if info.view().claims() {
                    format!("the claim moved to term {}", info.term)
                } else {
                    format!("node {} no longer claims", info.node_id)
                };
                self.act(action, Some(&info), &why)
            }
            _ => {
                let action = self.plan.enforce(now);
                self.act(action, None, "the claim was not renewed in time")
            }
        }
    }

    /// The node's claim now: the cluster's, or with `--role` the role's.
    async fn ask(&self) -> Result<(bool, LeaderInfo), electd_client::Error> {
        let Some((role, me)) = &self.role else {
            return self.client.claim().await;
        };
        let (holds, info) = self.client.role_claim(role).await?;
        Ok((holds, role_answer(*me, holds, &info)))
    }

    /// A health check's outcome. While checks fail, CMD is stopped (each answer is taken as a
    /// refusal: [`Supervisor::round`]) and, on a task of its own, the node withdraws and gives
    /// the role up (again at every failing check while it claims it); once one passes, it
    /// stands again. Nothing here waits on the network: the loop goes on enforcing deadlines.
    fn follow_health(&mut self) {
        let outcome = self
            .health
            .as_mut()
            .and_then(|h| h.borrow_and_update().clone());
        let (Some(outcome), Some((name, me))) = (outcome, self.role.clone()) else {
            return;
        };
        let was = self.unhealthy;
        self.unhealthy = outcome.is_err();
        match (&outcome, was) {
            (Err(why), false) => log(&format!(
                "the health check fails ({why}): CMD stops; node {me} withdraws from role {name} and gives it up"
            )),
            (Ok(()), true) => log(&format!(
                "the health check passes: node {me} stands for role {name} again"
            )),
            _ => {}
        }
        if self.changing.is_some() {
            return;
        }
        let c = self.changes.clone();
        self.changing = match (self.unhealthy, self.stood) {
            (true, true) => Some(tokio::spawn(async move { !withdraw(&c, &name, me).await })),
            (true, false) => Some(tokio::spawn(async move {
                give_up(&c, &name, me).await;
                false
            })),
            (false, false) => Some(tokio::spawn(async move {
                match c.stand(&name, me, true).await {
                    Ok(_) => true,
                    Err(e) => {
                        log(&format!("node {me} cannot stand for role {name} yet: {e}"));
                        false
                    }
                }
            })),
            (false, true) => None,
        };
    }

    /// The deadline timer fired.
    fn on_due(&mut self) -> Result<(), ExitCode> {
        let action = self.plan.enforce(self.clock.now_ns());
        self.act(action, None, "the claim was not renewed in time")
    }

    /// Carries out what the plan decided; `why` explains a SIGTERM.
    fn act(
        &mut self,
        action: Option<Action>,
        info: Option<&LeaderInfo>,
        why: &str,
    ) -> Result<(), ExitCode> {
        match (action, info) {
            (Some(Action::Start { term }), Some(info)) => self.start(term, info),
            (Some(Action::Term), _) => {
                if let Some(r) = &self.running {
                    log(&format!("SIGTERM to the child's group: {why}"));
                    r.signal(Signal::TERM);
                }
                Ok(())
            }
            (Some(Action::Kill), _) => {
                self.kill();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// SIGKILL to the child's group, logged with how long before the deadline it went out, or
    /// how late (and the deadline on CLOCK_MONOTONIC, for the tests that judge stamps against
    /// it).
    fn kill(&mut self) {
        let Some(r) = &self.running else { return };
        r.signal(Signal::KILL);
        let (boot, mono) = (self.clock.now_ns(), mono_ns());
        let deadline = self.plan.deadline_ns().unwrap_or(boot);
        let deadline_mono = (mono + deadline).saturating_sub(boot);
        log(&kill_note(deadline, boot, deadline_mono));
    }

    fn start(&mut self, term: u64, info: &LeaderInfo) -> Result<(), ExitCode> {
        self.plan.started(term);
        match self.spawn_cmd(term, info) {
            Ok(child) => {
                // `spawn` returns once CMD was exec'd: by this instant the child runs (on
                // CLOCK_MONOTONIC, for the benchmark that measures claim to exec; the child
                // may have run a little before it).
                let exec_mono = mono_ns();
                let group = child.id().and_then(|p| Pid::from_raw(p as i32));
                log(&format!(
                    "started {:?} (pid {}) for term {term} (exec mono {exec_mono})",
                    self.args.cmd[0],
                    child.id().unwrap_or(0),
                ));
                let keeper = group.and_then(|g| spawn_keeper(g, self.contain.cgroup()));
                self.running = Some(Running {
                    child,
                    group,
                    keeper,
                    contain: self.contain.clone(),
                });
                Ok(())
            }
            Err(e) => {
                self.plan.ended(0);
                log(&format!("cannot start {:?}: {e}", self.args.cmd[0]));
                Err(ExitCode::from(exit::CANNOT_START))
            }
        }
    }

    /// Spawns CMD for `term`: in a group of its own, told of the claim in its environment
    /// (`ELECTD_TERM`, `ELECTD_NODE_ID`, `ELECTD_LEASE_MS`: what is left of the deadline), in
    /// its cgroup where there is one, and with SIGKILL as its parent-death signal.
    fn spawn_cmd(&self, term: u64, info: &LeaderInfo) -> std::io::Result<Child> {
        let lease_left = self
            .plan
            .deadline_ns()
            .unwrap_or(0)
            .saturating_sub(self.clock.now_ns())
            / 1_000_000;
        let mut cmd = Command::new(&self.args.cmd[0]);
        cmd.args(&self.args.cmd[1..])
            .env("ELECTD_TERM", term.to_string())
            .env("ELECTD_NODE_ID", info.node_id.to_string())
            .env("ELECTD_LEASE_MS", lease_left.to_string())
            .envs(self.role.iter().flat_map(|(role, _)| {
                [
                    ("ELECTD_ROLE", role.to_string()),
                    ("ELECTD_TOKEN", term.to_string()),
                ]
            }))
            // A group of its own: every signal reaches what CMD starts in it, and a Ctrl-C
            // on the terminal reaches the supervisor only, which stops the child itself.
            .process_group(0)
            .kill_on_drop(true);
        let parent = rustix::process::getpid();
        // CMD writes itself into its cgroup before it execs, so that all it ever starts is
        // born there (the file, opened close-on-exec, is not left to CMD).
        let procs = self.contain.procs_file();
        let procs_fd = procs.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        // SAFETY: runs in the child between fork and exec: plain system calls (rustix, no
        // libc state, no allocation); `procs_fd` stays open in the parent until `spawn`
        // returns (`procs` lives past it).
        unsafe {
            cmd.pre_exec(move || {
                if let Some(fd) = procs_fd {
                    // Without it the subreaper still finds CMD's daemons.
                    let _ = rustix::io::write(std::os::fd::BorrowedFd::borrow_raw(fd), b"0");
                }
                // SIGKILL from the kernel when the supervisor's thread dies.
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
                // The supervisor may have died before the signal was armed.
                if rustix::process::getppid() != Some(parent) {
                    return Err(std::io::ErrorKind::Other.into());
                }
                Ok(())
            });
        }
        let spawned = cmd.spawn();
        drop(procs);
        spawned
    }

    /// The child ended: by our hand (the claim ended) or by itself.
    async fn reap(&mut self, status: std::process::ExitStatus) -> Option<ExitCode> {
        let r = self.running.take().expect("a running child");
        let signalled = self.plan.signalled();
        let term = self
            .plan
            .ended(self.clock.now_ns() + ms(self.args.restart_delay_ms))
            .unwrap_or(0);
        r.finish().await;
        if signalled {
            log(&format!("stopped (term {term}): {status}"));
            return None;
        }
        // Killed by a signal: 128 + its number, as shells report it.
        let code = status
            .code()
            .or_else(|| std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s))
            .unwrap_or(1);
        log(&format!("exited by itself (term {term}): {status}"));
        match self.args.restart {
            Restart::Never => Some(ExitCode::from(code as u8)),
            Restart::OnFailure if code == 0 => Some(ExitCode::SUCCESS),
            _ => None,
        }
    }

    /// SIGINT or SIGTERM: stop the child (SIGTERM, SIGKILL after the grace or before its
    /// deadline, whichever is first) and exit.
    async fn shut(&mut self) -> ExitCode {
        let Some(mut r) = self.running.take() else {
            return ExitCode::from(exit::STOPPED);
        };
        if let Some(Action::Term) = self.plan.stop(self.clock.now_ns()) {
            r.signal(Signal::TERM);
        }
        let kill_at = self.plan.due_ns().unwrap_or(0);
        let exited = tokio::select! {
            status = r.child.wait() => status.is_ok(),
            _ = self.clock.until(kill_at) => false,
        };
        if !exited {
            self.running = Some(r);
            self.kill();
            r = self.running.take().expect("the child");
            let _ = r.child.wait().await;
        }
        r.finish().await;
        ExitCode::from(exit::STOPPED)
    }
}

/// Resolves once `clock` reaches `due_ns` (at once if it passed); never if `None`.
async fn until_due(clock: &dyn BootClock, due_ns: Option<u64>) {
    match due_ns {
        Some(due) => clock.until(due).await,
        None => std::future::pending().await,
    }
}

/// `electd run`.
pub async fn run(args: RunArgs) -> ExitCode {
    use tokio::signal::unix::{signal as on, SignalKind};
    let (Ok(int), Ok(term)) = (on(SignalKind::interrupt()), on(SignalKind::terminate())) else {
        log("cannot install signal handlers");
        return ExitCode::from(1);
    };
    let stop = async move {
        let (mut int, mut term) = (int, term);
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    };
    supervise(args, std::sync::Arc::new(HostBoot), stop).await
}

/// The supervisor's loop on `clock`, until `stop` (SIGINT or SIGTERM) or CMD's end says so.
async fn supervise(
    args: RunArgs,
    clock: std::sync::Arc<dyn BootClock>,
    stop: impl std::future::Future<Output = ()>,
) -> ExitCode {
    let client = args
        .node
        .client(Duration::from_millis(args.poll_ms.max(1) * 2));
    let contain = std::sync::Arc::new(Containment::new());
    log(&format!(
        "the child's descendants are kept by: {}",
        contain.describe()
    ));
    tokio::pin!(stop);
    // Candidacy changes are answered once applied: longer than a poll.
    let changes = args
        .node
        .client(Duration::from_secs(6))
        .admin_token(args.admin_token.clone());
    if let Some(why) = args.health.invalid() {
        log(&why);
        return ExitCode::from(2);
    }
    // The first check decides whether the node stands at the start.
    let (health, _checks) = args.health.started().await;
    let healthy = health
        .as_ref()
        .is_none_or(|h| matches!(*h.borrow(), Some(Ok(()))));
    let role = match begin_role(&args, &changes, healthy, &mut stop).await {
        Ok(role) => role,
        Err(code) => return code,
    };
    let mut sup = Supervisor {
        plan: Plan::new(args.grace_ms, args.poll_ms),
        args,
        client,
        running: None,
        contain,
        clock,
        role,
        changes: changes.clone(),
        // With a health check, as if the node stood: a first check that failed withdraws a
        // candidacy left from before (a supervisor killed, an operator's).
        stood: health.is_some() || healthy,
        health,
        unhealthy: !healthy,
        changing: None,
    };
    if let Some((_, me)) = &sup.role {
        sup.plan.node = Some(*me);
    }
    sup.follow_health();
    let code = supervise_loop(&mut sup, stop).await;
    if let Some((name, me)) = &sup.role {
        withdraw(&changes, name, *me).await;
    }
    code
}

/// With `--role`: stands the node for it (`healthy`: only learns its id otherwise) unless
/// `stop` comes first (then withdraws what was asked and ends with [`exit::STOPPED`]); the
/// role and the node's id.
async fn begin_role(
    args: &RunArgs,
    changes: &Client,
    healthy: bool,
    stop: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Result<Option<(RoleName, NodeId)>, ExitCode> {
    let Some(name) = &args.role else {
        return Ok(None);
    };
    let me = tokio::select! {
        _ = stop => None,
        me = stand(changes, name, healthy) => Some(me),
    };
    match me {
        Some(Ok(me)) => Ok(Some((name.clone(), me))),
        // Stopped before the stand was applied: withdraw what was asked.
        None => {
            if let Ok(info) = changes.leader().await {
                withdraw(changes, name, info.node_id).await;
            }
            Err(ExitCode::from(exit::STOPPED))
        }
        Some(Err(code)) => Err(code),
    }
}

/// The supervisor's loop until `stop` or CMD's end says so.
async fn supervise_loop(
    sup: &mut Supervisor,
    stop: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> ExitCode {
    let mut stop = stop;
    let mut tick = tokio::time::interval(Duration::from_millis(sup.args.poll_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let changed = std::sync::Arc::new(tokio::sync::Notify::new());
    // The watch stream tells of the cluster's election only: a role's supervisor polls.
    let _follower = sup.role.is_none().then(|| {
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(follow(
            sup.args.node.clone(),
            changed.clone(),
        )))
    });
    loop {
        let clock = sup.clock.clone();
        let due = until_due(&*clock, sup.plan.due_ns());
        let exited = async {
            match sup.running.as_mut() {
                Some(r) => r.child.wait().await.ok(),
                None => std::future::pending().await,
            }
        };
        let step = tokio::select! {
            biased;
            _ = &mut stop => return sup.shut().await,
            status = exited => match status {
                Some(status) => match sup.reap(status).await {
                    Some(code) => return code,
                    None => Ok(()),
                },
                None => Ok(()),
            },
            _ = due => sup.on_due(),
            _ = health_checked(&mut sup.health) => {
                sup.follow_health();
                if sup.unhealthy { sup.round().await } else { Ok(()) }
            }
            stood = change_done(&mut sup.changing) => {
                (sup.stood, sup.changing) = (stood.unwrap_or(sup.stood), None);
                Ok(())
            }
            _ = changed.notified() => sup.round().await,
            _ = tick.tick() => sup.round().await,
        };
        if let Err(code) = step {
            return code;
        }
    }
}

/// Stands the node for `role` (`PUT /v1/roles/{name}/candidates/{id}`; with `stands` false only
/// learns the node's id: an unhealthy application does not stand), asking again every second
/// until it is done; the node's id. A refusal that asking again cannot change (a mode without
/// roles, a bad token: a 4xx other than a timeout) ends the supervisor with exit 2.
async fn stand(client: &Client, role: &RoleName, stands: bool) -> Result<NodeId, ExitCode> {
    let mut said = false;
    loop {
        let stood = async {
            let me = client.leader().await?.node_id;
            match stands {
                true => client.stand(role, me, true).await.map(|_| me),
                false => Ok(me),
            }
        };
        match stood.await {
            Ok(me) => {
                match stands {
                    true => log(&format!("node {me} stands for role {role}")),
                    false => log(&format!(
                        "node {me} does not stand for role {role} yet: the health check fails"
                    )),
                }
                return Ok(me);
            }
            Err(e @ electd_client::Error::Api { status, .. })
                if (400..500).contains(&status) && status != 408 && status != 429 =>
            {
                log(&format!("cannot stand for role {role}: {e}"));
                return Err(ExitCode::from(2));
            }
            Err(e) if !said => {
                said = true;
                log(&format!(
                    "cannot stand for role {role} yet (asking every second): {e}"
                ));
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Resolves when the candidacy change under way is done, with whether the node stands after
/// it (`None`: the task failed); never while none is under way.
async fn change_done(changing: &mut Option<tokio::task::JoinHandle<bool>>) -> Option<bool> {
    match changing {
        Some(task) => task.await.ok(),
        None => std::future::pending().await,
    }
}

/// Resolves at the next health check's outcome; never without a health check.
async fn health_checked(health: &mut Option<tokio::sync::watch::Receiver<Option<Outcome>>>) {
    let checked = match health {
        Some(rx) => rx.changed().await.is_ok(),
        None => false,
    };
    if !checked {
        std::future::pending::<()>().await;
    }
}

/// Withdraws node `me` from `role` as the supervisor exits (CMD has stopped) or the health
/// check fails, and gives the role up if the node holds it, so that another candidate may take
/// it at once; whether the withdrawal was applied.
async fn withdraw(client: &Client, role: &RoleName, me: NodeId) -> bool {
    let withdrawn = match client.stand(role, me, false).await {
        Ok(_) => {
            log(&format!("node {me} withdrew from role {role}"));
            true
        }
        Err(e) => {
            log(&format!("cannot withdraw node {me} from role {role}: {e}"));
            false
        }
    };
    give_up(client, role, me).await;
    withdrawn
}

/// Gives `role` up if node `me` holds it (a resign with its token: the node stops claiming at
/// once and releases once its promises have ended).
async fn give_up(client: &Client, role: &RoleName, me: NodeId) {
    let Ok((
        true,
        RoleClaimInfo {
            token: Some(token), ..
        },
    )) = client.role_claim(role).await
    else {
        return;
    };
    match client.resign_role(role, token).await {
        Ok(_) => log(&format!("node {me} gave up role {role} (token {token})")),
        Err(e) => log(&format!("cannot give up role {role} (token {token}): {e}")),
    }
}

/// Follows the node's watch stream and wakes the supervisor on every event (a change of the
/// node's view: a claim begun or ended). The events carry no promise: the supervisor asks
/// `GET /v1/claim` for one. Reconnects after a pause that doubles up to a second while the
/// node cannot be reached; the polls go on meanwhile.
async fn follow(at: NodeAddr, changed: std::sync::Arc<tokio::sync::Notify>) {
    let client = at.client(Duration::from_secs(1));
    let mut pause = Duration::from_millis(50);
    loop {
        if let Ok(mut stream) = client.watch(None).await {
            pause = Duration::from_millis(50);
            // The first event is the view now; every later one a change. Each wakes the
            // supervisor (a gap in the log too: the view may have changed).
            while let Ok(Some(_)) | Err(electd_client::Error::Gap { .. }) = stream.next().await {
                changed.notify_one();
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// `electd __keep-group GROUP` (hidden): the keeper of one child's process group. It reads
/// its standard input, a pipe whose other end only the supervisor holds, until the end of
/// file, which comes when the supervisor closes it (the child is gone) or dies; then it
/// kills the group and exits. So CMD, and whatever it started in its group, dies with its
/// supervisor, whatever killed the supervisor.
pub fn keep_group(group: i32, cgroup: Option<std::path::PathBuf>) -> ExitCode {
    let Some(group) = Pid::from_raw(group) else {
        return ExitCode::from(2);
    };
    let mut buf = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    while let Ok(n) = stdin.read(&mut buf) {
        if n == 0 {
            break;
        }
    }
    let _ = rustix::process::kill_process_group(group, Signal::KILL);
    // What left the group (daemons) is in the cgroup, if the run has one; without one, a
    // daemon of a killed supervisor is init's now and escapes (contain.rs).
    if let Some(dir) = cgroup {
        super::contain::kill_cgroup(&dir);
    }
    ExitCode::SUCCESS
}

/// The supervisor's loop on an injected clock (issue 48, item 4).
#[cfg(test)]
mod suspend {
    use super::*;
    use electd_client::{LeaderRef, Mode, Role};
    use std::sync::Arc;

    const MS: u64 = 1_000_000;

    /// A BOOTTIME that moves only when told: a host suspend is a jump.
    struct FakeBoot(tokio::sync::watch::Sender<u64>);

    impl BootClock for FakeBoot {
        fn now_ns(&self) -> u64 {
            *self.0.borrow()
        }
        fn until(&self, due_ns: u64) -> BoxFuture<'static, ()> {
            let mut rx = self.0.subscribe();
            Box::pin(async move {
                let _ = rx.wait_for(|now| *now >= due_ns).await;
            })
        }
    }

    /// A node that claims term 5 with 60 s of lease to every question (and has no watch).
    async fn claiming_node() -> String {
        let info = LeaderInfo {
            node_id: 1,
            mode: Mode::Quorum,
            role: Role::Leader,
            term: 5,
            leader: Some(LeaderRef {
                id: 1,
                addr: "127.0.0.1:1".into(),
            }),
            lease_ms: Some(60_000),
            no_promise: None,
        };
        let app = axum::Router::new().route(
            "/v1/claim",
            axum::routing::get(move || {
                let info = info.clone();
                async move { axum::Json(info) }
            }),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(l, app).await });
        addr
    }

    /// The child's deadline (60 s of lease from the first answer) passes while the host is
    /// suspended: BOOTTIME jumps past it at once, MONOTONIC does not move. The child is killed
    /// at the resume, and no poll comes to help (one a minute). Before, the deadline was
    /// waited for on a tokio timer (MONOTONIC), which still had its 60 s to run.
    #[tokio::test]
    async fn a_deadline_passed_in_a_suspend_is_enforced_at_the_resume() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let args = RunArgs {
            node: NodeAddr {
                addr: claiming_node().await,
                cacert: None,
                client_cert: None,
            },
            grace_ms: 40,
            poll_ms: 60_000,
            restart: Restart::Never,
            restart_delay_ms: 1000,
            role: None,
            admin_token: None,
            health: HealthArgs {
                health_cmd: None,
                health_url: None,
                health_interval_ms: 1000,
                health_timeout_ms: 500,
            },
            cmd: vec![
                "sh".into(),
                "-c".into(),
                format!("echo $$ > {}; exec sleep 30", pid_file.display()),
            ],
        };
        let (tx, _) = tokio::sync::watch::channel(1_000 * MS);
        let clock = Arc::new(FakeBoot(tx));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let sup = tokio::spawn(supervise(args, clock.clone(), async move {
            let _ = stop_rx.await;
        }));
        // Until the child runs (at most 10 s).
        let mut pid = None;
        for _ in 0..1000 {
            pid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse::<i32>().ok());
            if pid.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let pid = Pid::from_raw(pid.expect("the child started")).unwrap();
        let alive = || rustix::process::test_kill_process(pid).is_ok();
        assert!(alive());
        // The host is suspended for 61 s: the deadline (1,000 ms + 60 s) passed meanwhile.
        clock.0.send_replace(62_000 * MS);
        let resumed = std::time::Instant::now();
        let mut gone = false;
        for _ in 0..200 {
            if !alive() {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = stop_tx.send(());
        let _ = sup.await;
        assert!(
            gone,
            "the child still ran {:?} after a resume past its deadline",
            resumed.elapsed()
        );
    }

    /// A SIGKILL that went out late says how late, not "0.0 ms before".
    #[test]
    fn a_late_kill_says_how_late() {
        assert_eq!(
            kill_note(1_000 * MS, 995 * MS, 7),
            "SIGKILL to the child's group 5.0 ms before its deadline (mono 7)"
        );
        let late = kill_note(1_000 * MS, 62_000 * MS, 7);
        assert!(late.contains("61000.0 ms AFTER"), "{late}");
    }
}
