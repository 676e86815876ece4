//! The client commands of `electd`: `leader`, `status`, `watch`, `resign`, `member` and `roles`, each against one
//! node (`--node`) or the first of several that answers (`--endpoints`; admin requests to the
//! leader they name), through the typed client. Human lines by default, the API's JSON with
//! `--json`; the exit code says what a script needs to know (docs/applications.md, "Client
//! commands").

use std::process::ExitCode;
use std::time::{Duration, Instant};

use electd_client::{Client, Error, LeaderInfo, Members, Status, Watch, Watched};

use super::addr::{Failed, Nodes};

/// Exit codes of the client commands.
pub mod exit {
    /// Done: a leader is known (`leader`), the node answered (`status`), the handoff is done
    /// (`resign`), Ctrl-C (`watch`).
    pub const OK: u8 = 0;
    /// The node could not be reached (with `--endpoints`: none of them), or answered
    /// something unexpected.
    pub const UNREACHABLE: u8 = 1;
    /// Bad flags (clap's own code); also an admin request with `--endpoints` and without TLS
    /// whose leader is not one of the endpoints.
    pub const BAD_FLAGS: u8 = 2;
    /// The node answered no: no leader known now (`leader`), the resignation was refused
    /// (`resign`: not the leader, unknown or unsuitable successor, not supported, bad token);
    /// with `--endpoints`, an admin request none of them named a leader for.
    pub const NO: u8 = 3;
}

/// Where the node is (or the nodes are) and how to talk to it.
#[derive(clap::Args, Debug)]
pub struct NodeArgs {
    #[command(flatten)]
    pub at: Nodes,
    /// Print the API's JSON instead of a human line.
    #[arg(long, global = true)]
    pub json: bool,
    /// How long to wait for an answer, ms.
    #[arg(long, value_name = "MS", default_value_t = 2000, global = true)]
    pub timeout_ms: u64,
}

impl NodeArgs {
    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Asks the node, or each endpoint in order until one answers ([`Nodes::ask`]).
    pub(crate) async fn ask<T, F, Fut>(&self, ask: F) -> Result<T, Failed>
    where
        F: FnMut(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        let (_, answer) = self.at.ask(&self.at.addrs(), self.timeout(), ask).await?;
        Ok(answer)
    }
}

#[derive(clap::Args, Debug)]
pub struct ResignArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// The successor to hand the role to (default: the most up-to-date follower).
    #[arg(long, value_name = "ID")]
    pub to: Option<u64>,
    /// The node's admin token (prefer the environment: a flag shows in the process list).
    #[arg(long, env = "ELECTD_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct MemberArgs {
    #[command(subcommand)]
    pub change: MemberCommand,
    #[command(flatten)]
    pub node: NodeArgs,
    /// The node's admin token, for add and remove (prefer the environment).
    #[arg(
        long,
        env = "ELECTD_ADMIN_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub admin_token: Option<String>,
}

/// `electd member …`: quorum mode's runtime membership.
#[derive(clap::Subcommand, Debug)]
pub enum MemberCommand {
    /// The members in force on the node: id, address, voter or learner.
    List,
    /// Add a member (to the leader): a learner first, a voter once it has caught up. Start
    /// the new node with `--join` and an empty data dir. Waits up to a minute.
    Add {
        id: u64,
        /// HOST:PORT of its API and peer RPC.
        addr: String,
    },
    /// Remove a member (to the leader; removing the leader hands over first). Waits up to a
    /// minute.
    Remove { id: u64 },
}

#[derive(clap::Args, Debug)]
pub struct WatchArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Start after this event (its seq) instead of at the current view.
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// Give up when the node cannot be reached for this long, ms (0: never).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub give_up_ms: u64,
}

fn unreachable(e: &impl std::fmt::Display) -> ExitCode {
    eprintln!("electd: {e}");
    ExitCode::from(exit::UNREACHABLE)
}

/// The exit code of an admin request that failed, said on stderr: 3 when a node refused it
/// (or, with `--endpoints`, named no leader), 2 when the flags do not let the token go to the
/// leader, 1 when no node answered (or answered something unexpected).
pub(crate) fn admin_failed(f: &Failed) -> ExitCode {
    eprintln!("electd: {f}");
    ExitCode::from(match f {
        Failed::Answer(Error::Api { .. }) | Failed::NoLeader(_) => exit::NO,
        Failed::NotAnEndpoint { .. } => exit::BAD_FLAGS,
        Failed::Answer(_) | Failed::Unanswered(_) => exit::UNREACHABLE,
    })
}

pub(crate) fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("wire types serialise")
}

/// One line for a view: "node 1: follower, term 7, leader 3 (127.0.0.1:7003)".
pub fn describe(info: &LeaderInfo) -> String {
    let leader = match &info.leader {
        Some(l) => format!("leader {} ({})", l.id, l.addr),
        None => "no leader".to_string(),
    };
    let lease = match info.lease_ms {
        Some(ms) => format!(", claim {ms} ms left"),
        None => String::new(),
    };
    format!(
        "node {}: {}, term {}, {leader}{lease}",
        info.node_id,
        info.role.as_str(),
        info.term
    )
}

/// `electd leader`: exit 0 when the node knows a leader, 3 when it knows none.
pub async fn leader(args: NodeArgs) -> ExitCode {
    let info = match args.ask(|c| async move { c.leader().await }).await {
        Ok(i) => i,
        Err(e) => return unreachable(&e),
    };
    println!(
        "{}",
        if args.json {
            json(&info)
        } else {
            describe(&info)
        }
    );
    ExitCode::from(if info.leader.is_some() {
        exit::OK
    } else {
        exit::NO
    })
}

fn status_lines(s: &Status) -> String {
    let mut out = vec![
        describe(&s.leader),
        format!(
            "cluster {}, mode {}, version {}, up {} ms, seed {}",
            s.cluster_id,
            s.leader.mode.as_str(),
            s.version,
            s.uptime_ms,
            s.seed
        ),
        format!(
            "timings: heartbeat {} ms, follower lease {} ms, claim lease {} ms",
            s.timings.heartbeat_ms, s.timings.follower_lease_ms, s.timings.lease_ms
        ),
    ];
    for p in &s.peers {
        let heard = match p.last_contact_ms {
            Some(ms) => format!("heard {ms} ms ago"),
            None => "never heard".to_string(),
        };
        out.push(format!("peer {} ({}): {heard}", p.id, p.addr));
    }
    out.push(format!(
        "messages: {} sent, elections started {}, leader changes {}",
        s.counters.total_sent(),
        s.counters.elections_started,
        s.counters.leader_changes
    ));
    out.join("\n")
}

/// `electd status`: exit 0 when the node answered.
pub async fn status(args: NodeArgs) -> ExitCode {
    match args.ask(|c| async move { c.status().await }).await {
        Ok(s) => {
            let text = if args.json {
                json(&s)
            } else {
                status_lines(&s)
            };
            println!("{text}");
            ExitCode::from(exit::OK)
        }
        Err(e) => unreachable(&e),
    }
}

/// `electd resign`: exit 0 when the role was handed over, 3 when the node refused.
pub async fn resign(args: ResignArgs) -> ExitCode {
    let client = match args.node.at.leader(args.node.timeout()).await {
        Ok(c) => c.admin_token(args.admin_token.clone()),
        Err(f) => return admin_failed(&f),
    };
    match client.resign(args.to).await {
        Ok(done) => {
            if args.node.json {
                println!("{}", json(&done));
            } else {
                println!(
                    "resigned term {}; successor: node {}",
                    done.term, done.successor
                );
            }
            ExitCode::from(exit::OK)
        }
        Err(e) => admin_failed(&Failed::Answer(e)),
    }
}

fn members_lines(m: &Members) -> String {
    let mut out: Vec<String> = m
        .members
        .iter()
        .map(|x| {
            let kind = if x.voter { "voter" } else { "learner" };
            format!("node {} ({}): {kind}", x.id, x.addr)
        })
        .collect();
    if m.voter_sets.len() > 1 {
        out.push(format!(
            "a change is in progress: voters {:?} and {:?} (joint)",
            m.voter_sets[0], m.voter_sets[1]
        ));
    } else if !m.committed {
        out.push("not yet committed".to_string());
    }
    out.join("\n")
}

/// `electd member list|add|remove`: exit 0 when done, 3 when refused (not the leader, unknown
/// member, a change in progress, not quorum mode, bad token).
pub async fn member(args: MemberArgs) -> ExitCode {
    let answer = match &args.change {
        MemberCommand::List => args.node.ask(|c| async move { c.members().await }).await,
        change => {
            let client = match args.node.at.leader(args.node.timeout()).await {
                Ok(c) => c.admin_token(args.admin_token.clone()),
                Err(f) => return admin_failed(&f),
            };
            // A change waits for a learner to catch up and two commits.
            let client = client.timeout(Duration::from_millis(args.node.timeout_ms.max(60_000)));
            match change {
                MemberCommand::Add { id, addr } => client.add_member(*id, addr).await,
                MemberCommand::Remove { id } => client.remove_member(*id).await,
                MemberCommand::List => unreachable!("matched above"),
            }
            .map_err(Failed::Answer)
        }
    };
    match answer {
        Ok(m) => {
            let text = if args.node.json {
                json(&m)
            } else {
                members_lines(&m)
            };
            println!("{text}");
            ExitCode::from(exit::OK)
        }
        Err(f) => admin_failed(&f),
    }
}

fn watch_line(w: &Watched, as_json: bool) -> String {
    if as_json {
        let mut v = serde_json::to_value(&w.info).expect("wire types serialise");
        v["id"] = w.id.into();
        v.to_string()
    } else {
        format!("{:>6}  {}", w.id, describe(&w.info))
    }
}

/// Prints the stream's events, one line each, until it ends or fails: why it did. `last_id`
/// keeps up with the stream (the last event printed, or [`Watch::last_id`] after a gap).
async fn print_events(stream: &mut Watch, as_json: bool, last_id: &mut Option<u64>) -> String {
    loop {
        match stream.next().await {
            Ok(Some(w)) => {
                println!("{}", watch_line(&w, as_json));
                *last_id = Some(w.id);
            }
            Ok(None) => break "the node ended the stream".to_string(),
            // Events the node lost: said, and the stream goes on after them.
            Err(e @ Error::Gap { .. }) => {
                eprintln!("electd: {e}");
                *last_id = stream.last_id();
            }
            Err(e) => break e.to_string(),
        }
    }
}

/// `electd watch`: one line per event until Ctrl-C (exit 0); reconnects after the last event
/// it printed (no gap, no repeat), and gives up (exit 1) when the node stays unreachable for
/// `--give-up-ms`. With `--endpoints` it reconnects to the node it watched first, then to the
/// others in order; event numbers are each node's own, so on another node the watch starts at
/// that node's current view (and says so).
pub async fn watch(args: WatchArgs) -> ExitCode {
    let nodes = &args.node.at;
    let give_up = (args.give_up_ms > 0).then(|| Duration::from_millis(args.give_up_ms));
    let mut last_id = args.after;
    // The node whose event log `last_id` counts in (`--after`: the first to answer).
    let mut watched: Option<String> = None;
    let mut failing_since: Option<Instant> = None;
    let run = async {
        loop {
            let mut order = nodes.addrs();
            if let Some(w) = &watched {
                order.retain(|a| a != w);
                order.insert(0, w.clone());
            }
            let asked = nodes
                .ask(&order, args.node.timeout(), |c| {
                    let after = match &watched {
                        Some(w) if w != c.addr() => None,
                        _ => last_id,
                    };
                    async move { c.watch(after).await }
                })
                .await;
            let err = match asked {
                Ok((addr, mut stream)) => {
                    failing_since = None;
                    if watched.as_ref().is_some_and(|w| *w != addr) {
                        eprintln!(
                            "electd: watching {addr} now, from its current view (each node \
                             numbers its own events)"
                        );
                        last_id = None;
                    }
                    watched = Some(addr);
                    print_events(&mut stream, args.node.json, &mut last_id).await
                }
                Err(f @ Failed::Answer(Error::Api { .. })) => return unreachable(&f),
                Err(f) => f.to_string(),
            };
            let since = *failing_since.get_or_insert_with(Instant::now);
            if give_up.is_some_and(|g| since.elapsed() >= g) {
                eprintln!("electd: giving up: {err}");
                return ExitCode::from(exit::UNREACHABLE);
            }
            eprintln!("electd: {err}; reconnecting");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    tokio::select! {
        code = run => code,
        _ = tokio::signal::ctrl_c() => ExitCode::from(exit::OK),
    }
}
