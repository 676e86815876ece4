//! The client commands of `electd`: `leader`, `status`, `watch`, `resign` and `member`, each against one
//! node, through the typed client. Human lines by default, the API's JSON with `--json`; the
//! exit code says what a script needs to know (docs/applications.md, "Client commands").

use std::process::ExitCode;
use std::time::{Duration, Instant};

use electd_client::{Client, Error, LeaderInfo, Members, Status, Watched};

use super::addr::NodeAddr;

/// Exit codes of the client commands.
pub mod exit {
    /// Done: a leader is known (`leader`), the node answered (`status`), the handoff is done
    /// (`resign`), Ctrl-C (`watch`).
    pub const OK: u8 = 0;
    /// The node could not be reached, or answered something unexpected.
    pub const UNREACHABLE: u8 = 1;
    // 2: bad flags (clap's own code).
    /// The node answered no: no leader known now (`leader`), the resignation was refused
    /// (`resign`: not the leader, unknown or unsuitable successor, not supported, bad token).
    pub const NO: u8 = 3;
}

/// Where the node is and how to talk to it.
#[derive(clap::Args, Debug)]
pub struct NodeArgs {
    #[command(flatten)]
    pub at: NodeAddr,
    /// Print the API's JSON instead of a human line.
    #[arg(long, global = true)]
    pub json: bool,
    /// How long to wait for an answer, ms.
    #[arg(long, value_name = "MS", default_value_t = 2000, global = true)]
    pub timeout_ms: u64,
}

impl NodeArgs {
    fn client(&self) -> Client {
        self.at.client(Duration::from_millis(self.timeout_ms))
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

fn unreachable(e: &Error) -> ExitCode {
    eprintln!("electd: {e}");
    ExitCode::from(exit::UNREACHABLE)
}

fn json<T: serde::Serialize>(v: &T) -> String {
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
    let info = match args.client().leader().await {
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
    match args.client().status().await {
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
    let client = args.node.client().admin_token(args.admin_token.clone());
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
        Err(e @ Error::Api { .. }) => {
            eprintln!("electd: {e}");
            ExitCode::from(exit::NO)
        }
        Err(e) => unreachable(&e),
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
    let mut client = args.node.client().admin_token(args.admin_token.clone());
    let answer = match &args.change {
        MemberCommand::List => client.members().await,
        change => {
            // A change waits for a learner to catch up and two commits.
            client = client.timeout(Duration::from_millis(args.node.timeout_ms.max(60_000)));
            match change {
                MemberCommand::Add { id, addr } => client.add_member(*id, addr).await,
                MemberCommand::Remove { id } => client.remove_member(*id).await,
                MemberCommand::List => unreachable!("matched above"),
            }
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
        Err(e @ Error::Api { .. }) => {
            eprintln!("electd: {e}");
            ExitCode::from(exit::NO)
        }
        Err(e) => unreachable(&e),
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

/// `electd watch`: one line per event until Ctrl-C (exit 0); reconnects after the last event
/// it printed (no gap, no repeat), and gives up (exit 1) when the node stays unreachable for
/// `--give-up-ms`.
pub async fn watch(args: WatchArgs) -> ExitCode {
    let client = args.node.client();
    let give_up = (args.give_up_ms > 0).then(|| Duration::from_millis(args.give_up_ms));
    let mut last_id = args.after;
    let mut failing_since: Option<Instant> = None;
    let run = async {
        loop {
            let err = match client.watch(last_id).await {
                Ok(mut stream) => {
                    failing_since = None;
                    loop {
                        match stream.next().await {
                            Ok(Some(w)) => {
                                println!("{}", watch_line(&w, args.node.json));
                                last_id = Some(w.id);
                            }
                            Ok(None) => break "the node ended the stream".to_string(),
                            // Events the node lost: said, and the stream goes on after them.
                            Err(e @ Error::Gap { .. }) => {
                                eprintln!("electd: {e}");
                                last_id = stream.last_id();
                            }
                            Err(e) => break e.to_string(),
                        }
                    }
                }
                Err(e @ Error::Api { .. }) => return unreachable(&e),
                Err(e) => e.to_string(),
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
