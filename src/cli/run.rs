//! `electd run -- CMD [ARGS…]`: a supervisor, in a process of its own beside the node, that
//! runs CMD only while its node holds the claim (README, "electd run").
//!
//! It asks the node `GET /v1/claim` every `--poll-ms`. Its own deadline is the instant it
//! *sent* its last request that came back claiming, plus the `lease_ms` that came back: the
//! node's claim lasts at least that long, whatever happens to the node or the network after.
//! CMD gets SIGTERM `--grace-ms` before that deadline unless a newer answer renewed it, and
//! SIGKILL at the deadline; so CMD never outlives the claim, even when the node is paused,
//! killed or unreachable. The deadline is kept on `CLOCK_BOOTTIME`, as the node keeps its
//! lease: a suspended host does not stretch it. When the node answers that it no longer
//! claims (or claims in a new term), CMD gets SIGTERM at once and SIGKILL `--grace-ms` later
//! (never after the deadline). When the claim comes back, CMD starts again with the new term.

use std::process::ExitCode;
use std::time::Duration;

use electd::clock::{boot_ns, ms};
use electd_client::{Client, LeaderInfo};
use rustix::process::{Pid, Signal};
use tokio::process::{Child, Command};

use super::addr::NodeAddr;

/// Exit codes of `electd run` besides the child's own.
pub mod exit {
    /// Stopped by SIGINT or SIGTERM (the child was stopped first).
    pub const STOPPED: u8 = 0;
    /// CMD could not be started (not found, not executable).
    pub const CANNOT_START: u8 = 127;
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
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// The running child and the claim it runs under.
struct Running {
    child: Child,
    term: u64,
    /// Whether the supervisor has signalled it to stop.
    termed: bool,
}

/// How the supervisor stands.
struct Supervisor {
    args: RunArgs,
    client: Client,
    /// End of the claim known to hold (boot ns); 0 when none.
    deadline_ns: u64,
    running: Option<Running>,
    /// No start before this instant (boot ns): after CMD exited by itself.
    not_before_ns: u64,
}

fn signal(child: &Child, sig: Signal) {
    if let Some(pid) = child.id().and_then(|p| Pid::from_raw(p as i32)) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

fn log(line: &str) {
    eprintln!("electd run: {line}");
}

impl Supervisor {
    /// Asks the node once; renews the deadline when it claims. Answers the view, if any.
    async fn ask(&mut self) -> Option<LeaderInfo> {
        let sent = boot_ns();
        let (claims, info) = self.client.claim().await.ok()?;
        if claims {
            if let Some(lease) = info.lease_ms {
                self.deadline_ns = self.deadline_ns.max(sent + ms(lease));
            } else {
                // bully or ring: no lease; the claim holds until the next answer says otherwise.
                self.deadline_ns = self.deadline_ns.max(sent + ms(self.args.poll_ms * 2));
            }
        }
        Some(info)
    }

    fn start(&mut self, info: &LeaderInfo) -> Result<(), ExitCode> {
        let lease_left = self.deadline_ns.saturating_sub(boot_ns()) / 1_000_000;
        let mut cmd = Command::new(&self.args.cmd[0]);
        cmd.args(&self.args.cmd[1..])
            .env("ELECTD_TERM", info.term.to_string())
            .env("ELECTD_NODE_ID", info.node_id.to_string())
            .env("ELECTD_LEASE_MS", lease_left.to_string())
            // Its own process group: a Ctrl-C on the terminal reaches the supervisor, which
            // stops the child itself.
            .process_group(0)
            .kill_on_drop(true);
        match cmd.spawn() {
            Ok(child) => {
                log(&format!(
                    "started {:?} (pid {}) for term {}",
                    self.args.cmd[0],
                    child.id().unwrap_or(0),
                    info.term
                ));
                self.running = Some(Running {
                    child,
                    term: info.term,
                    termed: false,
                });
                Ok(())
            }
            Err(e) => {
                log(&format!("cannot start {:?}: {e}", self.args.cmd[0]));
                Err(ExitCode::from(exit::CANNOT_START))
            }
        }
    }

    /// SIGTERM now; SIGKILL after the grace or at the deadline, whichever is first.
    fn stop_soon(&mut self, why: &str) {
        let grace_end = boot_ns() + ms(self.args.grace_ms);
        self.deadline_ns = self.deadline_ns.min(grace_end);
        if let Some(r) = &mut self.running {
            if !r.termed {
                log(&format!("SIGTERM: {why}"));
                signal(&r.child, Signal::TERM);
                r.termed = true;
            }
        }
    }

    /// When [`Supervisor::enforce`] must run next (boot ns): never without a child.
    fn next_enforcement_ns(&self) -> u64 {
        match &self.running {
            Some(r) if r.termed => self.deadline_ns,
            Some(_) => self.deadline_ns.saturating_sub(ms(self.args.grace_ms)),
            None => u64::MAX,
        }
    }

    /// Enforces the deadline on the running child: SIGTERM within the grace, SIGKILL at it.
    fn enforce(&mut self) {
        let now = boot_ns();
        let Some(r) = &mut self.running else { return };
        if now >= self.deadline_ns {
            log("SIGKILL: the claim's deadline passed");
            signal(&r.child, Signal::KILL);
            r.termed = true;
        } else if now + ms(self.args.grace_ms) >= self.deadline_ns && !r.termed {
            log("SIGTERM: the claim was not renewed in time");
            signal(&r.child, Signal::TERM);
            r.termed = true;
        }
    }

    /// One round: ask, start or stop as the answer says, enforce the deadline.
    async fn round(&mut self) -> Result<(), ExitCode> {
        // The question waits no longer than the next instant the deadline must be enforced.
        let bound = Duration::from_nanos(self.next_enforcement_ns().saturating_sub(boot_ns()))
            .clamp(
                Duration::from_millis(1),
                Duration::from_millis(self.args.poll_ms.max(1) * 2),
            );
        let info = tokio::time::timeout(bound, self.ask()).await.ok().flatten();
        let now = boot_ns();
        if let Some(info) = info {
            let claims = info.view().claims() && now < self.deadline_ns;
            match &self.running {
                Some(r) if !claims => {
                    let why = format!("node {} no longer claims (term {})", info.node_id, r.term);
                    self.stop_soon(&why);
                }
                Some(r) if r.term != info.term => {
                    let why = format!("the claim moved to term {}", info.term);
                    self.stop_soon(&why);
                }
                // Started only with more claim left than the grace (else it would be stopped
                // at once).
                None if claims
                    && now >= self.not_before_ns
                    && self.deadline_ns > now + ms(self.args.grace_ms) =>
                {
                    self.start(&info)?
                }
                _ => {}
            }
        }
        self.enforce();
        Ok(())
    }

    /// The child ended: by our hand (the claim ended) or by itself.
    fn reap(&mut self, status: std::process::ExitStatus) -> Option<ExitCode> {
        let r = self.running.take().expect("a running child");
        if r.termed {
            log(&format!("stopped (term {}): {status}", r.term));
            return None;
        }
        // Killed by a signal: 128 + its number, as shells report it.
        let code = status
            .code()
            .or_else(|| std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s))
            .unwrap_or(1);
        log(&format!("exited by itself (term {}): {status}", r.term));
        match self.args.restart {
            Restart::Never => Some(ExitCode::from(code as u8)),
            Restart::OnFailure if code == 0 => Some(ExitCode::SUCCESS),
            _ => {
                self.not_before_ns = boot_ns() + ms(self.args.restart_delay_ms);
                None
            }
        }
    }

    /// SIGINT or SIGTERM: stop the child (SIGTERM, SIGKILL after the grace) and exit.
    async fn shut(&mut self) -> ExitCode {
        if let Some(mut r) = self.running.take() {
            signal(&r.child, Signal::TERM);
            let grace = Duration::from_millis(self.args.grace_ms);
            if tokio::time::timeout(grace, r.child.wait()).await.is_err() {
                signal(&r.child, Signal::KILL);
                let _ = r.child.wait().await;
            }
        }
        ExitCode::from(exit::STOPPED)
    }
}

/// `electd run`.
pub async fn run(args: RunArgs) -> ExitCode {
    use tokio::signal::unix::{signal as on, SignalKind};
    let client = Client::new(
        args.node.addr.clone(),
        Duration::from_millis(args.poll_ms.max(1) * 2),
    );
    let mut sup = Supervisor {
        args,
        client,
        deadline_ns: 0,
        running: None,
        not_before_ns: 0,
    };
    let (Ok(mut int), Ok(mut term)) = (on(SignalKind::interrupt()), on(SignalKind::terminate()))
    else {
        log("cannot install signal handlers");
        return ExitCode::from(1);
    };
    let mut tick = tokio::time::interval(Duration::from_millis(sup.args.poll_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let exited = async {
            match sup.running.as_mut() {
                Some(r) => r.child.wait().await.ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = int.recv() => return sup.shut().await,
            _ = term.recv() => return sup.shut().await,
            status = exited => {
                if let Some(status) = status {
                    if let Some(code) = sup.reap(status) {
                        return code;
                    }
                }
            }
            _ = tick.tick() => {
                if let Err(code) = sup.round().await {
                    return code;
                }
            }
        }
    }
}
