//! `electd doctor`: a health check of a whole cluster, from a shell. It learns the members from
//! the node(s) given (`GET /v1/members` in quorum mode; the other modes answer `409
//! not_supported`, and `GET /v1/status`'s peers stand in), then asks every member directly
//! (`/v1/status` twice, a second apart, `/v1/health`, `/v1/leader`, `/v1/members`, its latest
//! event) and prints one line per check, OK, WARN or FAIL, naming the member. It needs no admin
//! token: it reads the read API only.
//!
//! The checks: `discovery`, `reachable`, `cluster-id`, `mode`, `peer-auth` (refused peer
//! requests, by reason: another secret, cluster id or certificate), `membership`, `leader`,
//! `health`, `event-log`, `clock`, `roles` (quorum: placement). Exit codes: 0 all OK, 1 a voter
//! unreachable or any FAIL, 4 WARNs only (docs/operations.md, "electd doctor").

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use electd_client::{Client, Error, Event, LeaderInfo, NodeId, Role};
use futures_util::future::join_all;

use super::addr::Failed;
use super::client::{exit, NodeArgs};

mod peer_auth;
mod report;
mod seen;
use peer_auth::peer_auth;
use report::{list, nodes, Level, Report};
use seen::{First, Member, Second, Seen, SETTLE};

/// Exit code of `doctor` when no check failed but some warned.
pub const EXIT_WARN: u8 = 4;

/// A wall-clock offset between two members beyond this is worth a warning: the node's own log
/// warns past it too (`CLOCK_SKEW_WARN_MS`). Informative: electd decides nothing on wall clocks.
const CLOCK_WARN_MS: u64 = electd::auth::CLOCK_SKEW_WARN_MS;

/// How far behind the highest term a member's latest event may be before a warning.
const TERM_LAG: u64 = 1;

/// `electd doctor`: exit 0 when every check is OK, 1 when a voter is unreachable or a check
/// fails, 4 when some only warn (a member that doesn't vote and does not answer among them).
pub async fn doctor(args: NodeArgs) -> ExitCode {
    let timeout = Duration::from_millis(args.timeout_ms);
    let mut report = Report {
        checks: Vec::new(),
        names: BTreeMap::new(),
    };
    let started = Instant::now();
    match discover(&args, timeout).await {
        Ok((members, quorum, detail)) => {
            report.names = members.iter().map(|m| (m.id, m.addr.clone())).collect();
            report.add("discovery", None, Level::Ok, detail);
            let seen = read_all(&args, &members, quorum, timeout).await;
            judge(&mut report, &seen, quorum);
            if quorum {
                let (line, well) = super::roles::placement_of(&args, &report.names).await;
                report.add("roles", None, [Level::Warn, Level::Ok][well as usize], line);
            }
        }
        Err(detail) => report.add("discovery", None, Level::Fail, detail),
    }
    let worst = report.worst();
    let code = match worst {
        Level::Ok => exit::OK,
        Level::Warn => EXIT_WARN,
        Level::Fail => exit::UNREACHABLE,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report.checks).expect("checks serialise")
        );
    } else {
        for c in &report.checks {
            println!(
                "{:<4}  {:<10}  {}: {}",
                c.status.as_str(),
                c.check,
                report.who(c.member),
                c.detail
            );
        }
        let count = |l: Level| report.checks.iter().filter(|c| c.status == l).count();
        println!(
            "{} members, {} checks in {:.1} s: {} OK, {} WARN, {} FAIL (exit {code})",
            report.names.len(),
            report.checks.len(),
            started.elapsed().as_secs_f64(),
            count(Level::Ok),
            count(Level::Warn),
            count(Level::Fail),
        );
    }
    ExitCode::from(code)
}

/// The members, from the first of the given nodes that answers: its `/v1/members` (quorum
/// mode), else its `/v1/status` (its own id at the address asked, and its peers). Also whether
/// the cluster runs quorum mode, and a line saying where the members came from.
async fn discover(
    args: &NodeArgs,
    timeout: Duration,
) -> Result<(Vec<Member>, bool, String), String> {
    let order = args.at.addrs();
    let asked = args
        .at
        .ask(&order, timeout, |c| async move { c.members().await })
        .await;
    match asked {
        Ok((addr, m)) if !m.members.is_empty() => {
            let members: Vec<Member> = m
                .members
                .iter()
                .map(|m| Member {
                    id: m.id,
                    addr: m.addr.clone(),
                    voter: m.voter,
                })
                .collect();
            let detail = format!(
                "{} members from {addr}'s /v1/members: {}",
                members.len(),
                list(members.iter().map(|m| m.id))
            );
            return Ok((members, true, detail));
        }
        // A node that joins and has no log yet, or a mode without runtime membership.
        Ok(_) | Err(Failed::Answer(Error::Api { .. })) => {}
        Err(f) => return Err(format!("no node to ask: {f}")),
    }
    let (addr, s) = args
        .at
        .ask(&order, timeout, |c| async move { c.status().await })
        .await
        .map_err(|f| format!("no node to ask: {f}"))?;
    let mut members = vec![Member {
        id: s.leader.node_id,
        addr: addr.clone(),
        voter: true,
    }];
    members.extend(s.peers.iter().map(|p| Member {
        id: p.id,
        addr: p.addr.clone(),
        voter: true,
    }));
    members.sort_by_key(|m| m.id);
    let quorum = s.leader.mode == electd_client::Mode::Quorum;
    let detail = format!(
        "{} members from {addr}'s /v1/status ({} mode): {}",
        members.len(),
        s.leader.mode,
        list(members.iter().map(|m| m.id))
    );
    Ok((members, quorum, detail))
}

/// Asks every member, all at once: a first read, a pause of [`SETTLE`], a second.
async fn read_all(
    args: &NodeArgs,
    members: &[Member],
    quorum: bool,
    timeout: Duration,
) -> Vec<Seen> {
    let clients: Vec<Client> = members
        .iter()
        .map(|m| args.at.at.client_at(m.addr.clone(), timeout))
        .collect();
    let firsts = join_all(clients.iter().map(|c| first_read(c, quorum, timeout))).await;
    tokio::time::sleep(SETTLE).await;
    let seconds = join_all(clients.iter().zip(&firsts).map(|(c, f)| async move {
        match f {
            Ok(_) => {
                let (status, leader) = tokio::join!(c.status(), c.leader());
                Some(Second { status, leader })
            }
            Err(_) => None,
        }
    }))
    .await;
    members
        .iter()
        .cloned()
        .zip(firsts)
        .zip(seconds)
        .map(|((member, first), second)| Seen {
            member,
            first,
            second,
        })
        .collect()
}

async fn first_read(c: &Client, quorum: bool, timeout: Duration) -> Result<First, Error> {
    let t0 = Instant::now();
    let status = c.status().await?;
    let took = t0.elapsed();
    let members = async {
        if quorum {
            Some(c.members().await)
        } else {
            None
        }
    };
    let (health, members, last_event) = tokio::join!(c.health(), members, last_event(c, timeout));
    Ok(First {
        status,
        took,
        health,
        members,
        last_event,
    })
}

/// The latest event of a member's log: the first event of a watch stream carries its seq (the
/// current view, numbered as the last event), and `/v1/events?since=SEQ` the event itself.
async fn last_event(c: &Client, timeout: Duration) -> Result<Option<Event>, String> {
    let mut stream = c.watch(None).await.map_err(|e| e.to_string())?;
    let first = tokio::time::timeout(timeout, stream.next())
        .await
        .map_err(|_| format!("no first watch event within {} ms", timeout.as_millis()))?
        .map_err(|e| e.to_string())?
        .ok_or("the node ended the watch stream")?;
    drop(stream);
    if first.id == 0 {
        return Ok(None);
    }
    let page = c.events(first.id, 1).await.map_err(|e| e.to_string())?;
    Ok(page.events.into_iter().find(|e| e.seq == first.id))
}

fn judge(report: &mut Report, seen: &[Seen], quorum: bool) {
    reachable(report, seen);
    let up: Vec<&Seen> = seen.iter().filter(|s| s.first.is_ok()).collect();
    if up.is_empty() {
        return;
    }
    cluster_id(report, &up);
    mode(report, &up);
    peer_auth(report, &up);
    membership(report, &up, quorum);
    leader(report, &up);
    health(report, &up);
    event_log(report, &up);
    clock(report, &up);
}

fn reachable(report: &mut Report, seen: &[Seen]) {
    for s in seen {
        let id = Some(s.member.id);
        // A member that does not vote counts in no majority: one that does not answer is a
        // warning (the leader removes it once absent for `nonvoters.remove_after_ms`).
        let (down, whose) = match s.member.voter {
            true => (Level::Fail, ""),
            false => (Level::Warn, "a member that does not vote, "),
        };
        match (&s.first, &s.second) {
            (Ok(f), Some(Second { status: Err(e), .. })) => report.add(
                "reachable",
                id,
                down,
                format!(
                    "{whose}answered in {} ms, then not a second later: {e}",
                    f.took.as_millis()
                ),
            ),
            (Ok(f), _) if f.status.leader.node_id != s.member.id => report.add(
                "reachable",
                id,
                Level::Fail,
                format!(
                    "the node at {} says it is node {}, not {}",
                    s.member.addr, f.status.leader.node_id, s.member.id
                ),
            ),
            (Ok(f), _) => report.add(
                "reachable",
                id,
                Level::Ok,
                format!(
                    "answered in {} ms (version {})",
                    f.took.as_millis(),
                    f.status.version
                ),
            ),
            (Err(e), _) => {
                let why = format!("{whose}{}", why_unreachable(e));
                report.add("reachable", id, down, why)
            }
        }
    }
}

/// The client's own text (every cause, and its hint at TLS), with what kind of failure it is.
fn why_unreachable(e: &Error) -> String {
    let text = e.to_string();
    let lower = text.to_lowercase();
    let kind = if e.status().is_some() {
        "answered an error"
    } else if lower.contains("refused") {
        "connection refused"
    } else if lower.contains("timed out") || lower.contains("timeout") || lower.contains("elapsed")
    {
        "timeout"
    } else if lower.contains("certificate")
        || lower.contains("tls")
        || lower.contains("handshake")
        || lower.contains("corrupt message")
        || lower.contains("invalidcontenttype")
    {
        "TLS error"
    } else if lower.contains("dns") || lower.contains("resolve") || lower.contains("lookup") {
        "name not resolved"
    } else {
        "no answer"
    };
    format!("unreachable ({kind}): {text}")
}

fn cluster_id(report: &mut Report, up: &[&Seen]) {
    let mut by_id: BTreeMap<&str, Vec<NodeId>> = BTreeMap::new();
    for s in up {
        if let Some(st) = s.status() {
            by_id.entry(&st.cluster_id).or_default().push(s.member.id);
        }
    }
    if by_id.len() <= 1 {
        let (id, _) = by_id.iter().next().expect("a member answered");
        report.add(
            "cluster-id",
            None,
            Level::Ok,
            format!("every member answering: {id:?}"),
        );
        return;
    }
    let common = by_id
        .iter()
        .max_by_key(|(_, ids)| ids.len())
        .map(|(id, _)| id.to_string())
        .expect("two ids");
    for (cid, ids) in &by_id {
        if **cid == common {
            continue;
        }
        for id in ids {
            report.add(
                "cluster-id",
                Some(*id),
                Level::Fail,
                format!(
                    "cluster_id {cid:?}, the others' {common:?}: its peer requests are refused \
                     (wrong_cluster) and it refuses theirs"
                ),
            );
        }
    }
}

fn mode(report: &mut Report, up: &[&Seen]) {
    let mut by_mode: BTreeMap<&str, Vec<NodeId>> = BTreeMap::new();
    let mut two_leaders = Vec::new();
    for s in up {
        if let Some(st) = s.status() {
            by_mode
                .entry(st.leader.mode.as_str())
                .or_default()
                .push(s.member.id);
            if st.two_leaders_possible {
                two_leaders.push(s.member.id);
            }
        }
    }
    if by_mode.len() > 1 {
        let said: Vec<String> = by_mode
            .iter()
            .map(|(m, ids)| format!("{} {m}", nodes(ids)))
            .collect();
        report.add(
            "mode",
            None,
            Level::Fail,
            format!(
                "the members run different modes: {} (every member must run the same)",
                said.join("; ")
            ),
        );
    }
    let modes: Vec<&str> = by_mode.keys().copied().collect();
    if !two_leaders.is_empty() {
        report.add(
            "mode",
            None,
            Level::Warn,
            format!(
                "{} mode: two members may lead at once under a partition ({} say \
                 two_leaders_possible; kept for comparison, no claim is a lease-bound promise): \
                 use quorum mode for one leader (docs/modes.md)",
                modes.join(", "),
                nodes(&two_leaders)
            ),
        );
    } else if by_mode.len() == 1 {
        report.add(
            "mode",
            None,
            Level::Ok,
            format!(
                "{} mode: at most one leader at a time, its claim a lease-bound promise",
                modes[0]
            ),
        );
    }
}

/// A member's view of the members: id to address (`None`: its own, in a mode without
/// `/v1/members`, where it does not say its address), and whether a voter.
type MemberView = BTreeMap<NodeId, (Option<String>, bool)>;

fn describe_view(v: &MemberView) -> String {
    if v.is_empty() {
        return "no member (it has not received the cluster's log yet)".to_string();
    }
    v.iter()
        .map(|(id, (addr, voter))| {
            let mut s = id.to_string();
            if let Some(a) = addr {
                s.push_str(&format!(" {a}"));
            }
            if !voter {
                s.push_str(" (learner)");
            }
            s
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether two views name the same members, at the same addresses where both say one.
fn same_view(a: &MemberView, b: &MemberView) -> bool {
    a.len() == b.len()
        && a.iter().all(|(id, (addr, voter))| {
            b.get(id).is_some_and(|(other, v)| {
                v == voter && (addr.is_none() || other.is_none() || addr == other)
            })
        })
}

fn membership(report: &mut Report, up: &[&Seen], quorum: bool) {
    let mut views: Vec<(NodeId, Result<MemberView, String>)> = Vec::new();
    for s in up {
        let f = s.first().expect("up");
        let view = match &f.members {
            Some(Ok(m)) => Ok(m
                .members
                .iter()
                .map(|x| (x.id, (Some(x.addr.clone()), x.voter)))
                .collect::<MemberView>()),
            Some(Err(e)) if quorum => Err(e.to_string()),
            _ => {
                let st = s.status().expect("up");
                let mut v: MemberView = st
                    .peers
                    .iter()
                    .map(|p| (p.id, (Some(p.addr.clone()), true)))
                    .collect();
                v.insert(st.leader.node_id, (None, true));
                Ok(v)
            }
        };
        views.push((s.member.id, view));
    }
    // The view most members hold is the reference.
    let good: Vec<&MemberView> = views.iter().filter_map(|(_, v)| v.as_ref().ok()).collect();
    let reference = good
        .iter()
        .max_by_key(|v| good.iter().filter(|w| same_view(v, w)).count())
        .copied();
    for (id, view) in &views {
        let (level, detail) = match (view, reference) {
            (Err(e), _) => (Level::Fail, format!("cannot read its members: {e}")),
            (Ok(v), Some(r)) if same_view(v, r) => (
                Level::Ok,
                format!(
                    "the same {} members as the others: {}",
                    v.len(),
                    list(v.keys().copied())
                ),
            ),
            (Ok(v), r) => (
                Level::Fail,
                format!(
                    "sees {}; most members see {}",
                    describe_view(v),
                    r.map(describe_view).unwrap_or_default()
                ),
            ),
        };
        report.add("membership", Some(*id), level, detail);
    }
}

fn leader(report: &mut Report, up: &[&Seen]) {
    let views: Vec<(NodeId, &LeaderInfo)> = up
        .iter()
        .filter_map(|s| s.view().map(|v| (s.member.id, v)))
        .collect();
    // The (leader, term) most members name.
    let mut named: BTreeMap<(NodeId, u64), Vec<NodeId>> = BTreeMap::new();
    for (id, v) in &views {
        if let Some(l) = &v.leader {
            named.entry((l.id, v.term)).or_default().push(*id);
        }
    }
    let agreed = named
        .iter()
        .max_by_key(|(_, ids)| ids.len())
        .map(|(k, _)| *k);
    let claimants: Vec<(NodeId, u64)> = views
        .iter()
        .filter(|(_, v)| v.role == Role::Leader)
        .map(|(id, v)| (*id, v.term))
        .collect();
    for (id, v) in &views {
        let (level, detail) = member_leader(v, agreed);
        report.add("leader", Some(*id), level, detail);
    }
    let (level, detail) = cluster_leader(views.len(), &named, &claimants);
    report.add("leader", None, level, detail);
}

/// What one member's view says of the leader, beside the (leader, term) most members name
/// (`agreed`).
fn member_leader(v: &LeaderInfo, agreed: Option<(NodeId, u64)>) -> (Level, String) {
    match (&v.leader, agreed) {
        (None, _) => (
            Level::Warn,
            format!("names no leader ({}, term {})", v.role.as_str(), v.term),
        ),
        (Some(l), Some((al, at))) if (l.id, v.term) != (al, at) => (
            Level::Fail,
            format!(
                "names node {} at term {}; most members name node {al} at term {at}",
                l.id, v.term
            ),
        ),
        (Some(_), _) if v.role == Role::Leader => (
            Level::Ok,
            match v.lease_ms {
                Some(ms) => format!("leads at term {} (claim {ms} ms left)", v.term),
                None => format!("leads at term {}", v.term),
            },
        ),
        (Some(l), _) => (
            Level::Ok,
            format!(
                "names node {} at term {} ({})",
                l.id,
                v.term,
                v.role.as_str()
            ),
        ),
    }
}

/// What the reachable members' views (`reachable`: how many) say of the leader together, from
/// the members that name each (leader, term) (`named`) and those that claim to lead, at their
/// terms (`claimants`).
fn cluster_leader(
    reachable: usize,
    named: &BTreeMap<(NodeId, u64), Vec<NodeId>>,
    claimants: &[(NodeId, u64)],
) -> (Level, String) {
    if claimants.len() > 1 {
        let who: Vec<NodeId> = claimants.iter().map(|(id, _)| *id).collect();
        let terms: Vec<String> = claimants.iter().map(|(_, t)| t.to_string()).collect();
        (
            Level::Fail,
            format!(
                "{} claim to lead at once (terms {})",
                nodes(&who),
                terms.join(", ")
            ),
        )
    } else if named.len() > 1 {
        let said: Vec<String> = named
            .iter()
            .map(|((l, t), ids)| format!("{} name node {l} at term {t}", nodes(ids)))
            .collect();
        (
            Level::Fail,
            format!("the members disagree: {}", said.join("; ")),
        )
    } else if let Some(((l, t), ids)) = named.iter().next() {
        one_leader_named(reachable, (*l, *t), ids, !claimants.is_empty())
    } else {
        (
            Level::Fail,
            format!("none of {reachable} reachable members names a leader"),
        )
    }
}

/// What the reachable members' views (`reachable`: how many) say of the leader when all that
/// name one (`ids`) name node `l` at term `t`; `claimed`: whether a member claimed to lead
/// when asked.
fn one_leader_named(
    reachable: usize,
    (l, t): (NodeId, u64),
    ids: &[NodeId],
    claimed: bool,
) -> (Level, String) {
    let none = reachable - ids.len();
    if none > 0 {
        (
            Level::Warn,
            format!(
                "{} of {reachable} reachable members name node {l} at term {t}; {none} {} none",
                ids.len(),
                if none == 1 { "names" } else { "name" }
            ),
        )
    } else if !claimed {
        (
            Level::Warn,
            format!(
                "all {reachable} reachable members name node {l} at term {t}, which did not \
                 hold the claim when asked"
            ),
        )
    } else {
        (
            Level::Ok,
            format!("all {reachable} reachable members name node {l} at term {t}"),
        )
    }
}

fn health(report: &mut Report, up: &[&Seen]) {
    for s in up {
        let f = s.first().expect("up");
        let (level, detail) = match &f.health {
            Ok(h) if h.status == "ok" => (Level::Ok, "ok".to_string()),
            Ok(h) => (Level::Warn, format!("status {:?}", h.status)),
            Err(e) => (Level::Fail, e.to_string()),
        };
        report.add("health", Some(s.member.id), level, detail);
    }
}

fn event_log(report: &mut Report, up: &[&Seen]) {
    let highest = up
        .iter()
        .flat_map(|s| {
            let event = s
                .first()
                .and_then(|f| f.last_event.as_ref().ok())
                .and_then(|e| e.as_ref().map(|e| e.view.term));
            [event, s.view().map(|v| v.term)]
        })
        .flatten()
        .max()
        .unwrap_or(0);
    for s in up {
        let f = s.first().expect("up");
        let (level, detail) = match &f.last_event {
            Err(e) => (Level::Warn, format!("cannot read its latest event: {e}")),
            Ok(None) => (Level::Warn, "no event recorded yet".to_string()),
            Ok(Some(e)) => {
                let leader = match e.view.leader {
                    Some(l) => format!("leader {l}"),
                    None => "no leader".to_string(),
                };
                let said = format!(
                    "latest event #{}: {}, term {}, {leader}",
                    e.seq,
                    e.view.role.as_str(),
                    e.view.term
                );
                if e.view.term + TERM_LAG < highest {
                    (
                        Level::Warn,
                        format!(
                            "{said}: behind the highest term {highest} by more than {TERM_LAG}"
                        ),
                    )
                } else {
                    (Level::Ok, format!("{said} (highest term {highest})"))
                }
            }
        };
        report.add("event-log", Some(s.member.id), level, detail);
    }
}

fn clock(report: &mut Report, up: &[&Seen]) {
    let mut warned: BTreeSet<(NodeId, NodeId)> = BTreeSet::new();
    for s in up {
        let Some(st) = s.status() else { continue };
        let me = s.member.id;
        let mut known = 0;
        let mut widest = 0u64;
        let mut far = false;
        for p in &st.peers {
            let Some(off) = p.clock_offset_ms else {
                continue;
            };
            known += 1;
            widest = widest.max(off.unsigned_abs());
            if off.unsigned_abs() <= CLOCK_WARN_MS {
                continue;
            }
            far = true;
            let pair = (me.min(p.id), me.max(p.id));
            if !warned.insert(pair) {
                continue; // said from the other side
            }
            report.add(
                "clock",
                Some(me),
                Level::Warn,
                format!(
                    "node {}'s wall clock is {} ms {} node {me}'s (seen in its requests, network \
                     delay included; informative: electd decides nothing on wall clocks, but \
                     logs and certificates will disagree)",
                    p.id,
                    off.unsigned_abs(),
                    if off > 0 { "ahead of" } else { "behind" }
                ),
            );
        }
        if far {
            continue;
        }
        let detail = if known == 0 {
            "no peer request seen yet: offsets unknown (informative only)".to_string()
        } else {
            format!(
                "{} wall clock{} within {widest} ms of its own (informative: electd decides \
                 nothing on wall clocks)",
                if known == 1 {
                    "its peer's".to_string()
                } else {
                    format!("{known} peers'")
                },
                if known == 1 { "" } else { "s" },
            )
        };
        report.add("clock", Some(me), Level::Ok, detail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member that did not answer.
    fn silent(id: NodeId, voter: bool) -> Seen {
        Seen {
            member: Member {
                id,
                addr: format!("127.0.0.1:{}", 7000 + id),
                voter,
            },
            first: Err(Error::Decode {
                addr: String::new(),
                status: 502,
                message: "no answer".into(),
            }),
            second: None,
        }
    }

    #[test]
    fn a_silent_voter_fails_and_a_silent_nonvoter_warns() {
        let mut report = Report {
            checks: Vec::new(),
            names: BTreeMap::new(),
        };
        reachable(&mut report, &[silent(1, true), silent(4, false)]);
        let levels: Vec<(Option<NodeId>, Level)> =
            report.checks.iter().map(|c| (c.member, c.status)).collect();
        assert_eq!(levels, [(Some(1), Level::Fail), (Some(4), Level::Warn)]);
        assert!(report.checks[1]
            .detail
            .starts_with("a member that does not vote, "));
    }
}
