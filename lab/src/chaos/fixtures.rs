//! Test data shared by the tests of the checkers, the verdict, the report and the timeline:
//! events, fault windows and promises in nanoseconds, a sample run log, and a check that an
//! SVG's tags are balanced.

use super::record::{FaultWindow, ProcEvent, ProcKind, Promise, RunLog};
use electd_client::{Event, NodeId, Role, View};

fn ev(t_ms: u64, node: NodeId, role: Role, term: u64, leader: Option<NodeId>) -> Event {
    Event {
        seq: t_ms,
        t_mono_ns: 5_000 * MS + t_ms * MS,
        node_id: node,
        view: View { role, term, leader },
    }
}

/// A bully-like run: leader 5 isolated at 2 s (keeps claiming), 4 takes over on the other
/// side, heal at 5 s, 5 wins back; node 2 is killed at 6 s and restarted at 7 s; node 3 is
/// paused from 8 s to 9 s.
pub(super) fn sample_log() -> RunLog {
    let base = 5_000 * MS;
    let at = |ms: u64| base + ms * MS;
    let mut events = Vec::new();
    for n in 1..=5 {
        events.push(ev(0, n, Role::Candidate, 1, None));
    }
    events.push(ev(300, 5, Role::Leader, 1, Some(5)));
    for n in 1..=4 {
        events.push(ev(320 + n * 5, n, Role::Follower, 1, Some(5)));
    }
    for n in 1..=4 {
        events.push(ev(2600, n, Role::Candidate, 2, None));
    }
    events.push(ev(2900, 4, Role::Leader, 2, Some(4)));
    for n in 1..=3 {
        events.push(ev(2950, n, Role::Follower, 2, Some(4)));
    }
    events.push(ev(5200, 4, Role::Follower, 3, Some(5)));
    events.push(ev(5200, 5, Role::Leader, 3, Some(5)));
    for n in 1..=3 {
        events.push(ev(5250, n, Role::Follower, 3, Some(5)));
    }
    events.push(ev(7400, 2, Role::Follower, 3, Some(5)));
    RunLog {
        nodes: (1..=5).collect(),
        start_ns: base,
        end_ns: at(10_000),
        events,
        procs: vec![
            ProcEvent {
                t_ns: at(6000),
                node: 2,
                kind: ProcKind::Kill,
            },
            ProcEvent {
                t_ns: at(7000),
                node: 2,
                kind: ProcKind::Start,
            },
            ProcEvent {
                t_ns: at(8000),
                node: 3,
                kind: ProcKind::Pause,
            },
            ProcEvent {
                t_ns: at(9000),
                node: 3,
                kind: ProcKind::Resume,
            },
        ],
        faults: vec![
            FaultWindow {
                start_ns: at(2000),
                end_ns: at(5000),
                label: "isolate n5 (1,2,3,4 | 5)".into(),
                groups: vec![vec![1, 2, 3, 4], vec![5]],
            },
            FaultWindow {
                start_ns: at(3500),
                end_ns: at(4200),
                label: "loss 30% <all>".into(),
                groups: vec![],
            },
        ],
        heal_ns: Some(at(5000)),
        fault_ns: Some(at(2000)),
        leased: false,
        promises: Vec::new(),
        dropped: Default::default(),
        role_promises: Default::default(),
        voters: Vec::new(),
    }
}

/// Checks that every tag is closed in order; returns the element names seen.
pub(super) fn balanced_tags(svg: &str) -> Result<Vec<String>, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut names = Vec::new();
    let mut rest = svg;
    while let Some(open) = rest.find('<') {
        let close = rest[open..].find('>').ok_or("unterminated tag")? + open;
        let tag = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack.pop().ok_or(format!("stray </{name}>"))?;
            if top != name.trim() {
                return Err(format!("</{name}> closes <{top}>"));
            }
        } else {
            let name: String = tag
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '/')
                .collect();
            if name.is_empty() || tag.contains('<') {
                return Err(format!("bad tag <{tag}>"));
            }
            names.push(name.clone());
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
    }
    if stack.is_empty() {
        Ok(names)
    } else {
        Err(format!("unclosed: {stack:?}"))
    }
}

// ---- Building blocks of run logs, stamped in nanoseconds ----

pub(super) const MS: u64 = 1_000_000;
pub(super) const S: u64 = 1_000_000_000;

pub(super) fn event(
    t_ns: u64,
    node: NodeId,
    role: Role,
    term: u64,
    leader: Option<NodeId>,
) -> Event {
    Event {
        seq: t_ns,
        t_mono_ns: t_ns,
        node_id: node,
        view: View { role, term, leader },
    }
}
pub(super) fn lead(t_ns: u64, node: NodeId, term: u64) -> Event {
    event(t_ns, node, Role::Leader, term, Some(node))
}
pub(super) fn follow(t_ns: u64, node: NodeId, term: u64, leader: Option<NodeId>) -> Event {
    event(t_ns, node, Role::Follower, term, leader)
}
pub(super) fn proc_(t_ns: u64, node: NodeId, kind: ProcKind) -> ProcEvent {
    ProcEvent { t_ns, node, kind }
}
pub(super) fn log(end_ns: u64, events: Vec<Event>) -> RunLog {
    RunLog {
        nodes: (1..=5).collect(),
        start_ns: 0,
        end_ns,
        events,
        ..RunLog::default()
    }
}
/// Everyone follows `leader` (term 1) from `t`, and `leader` leads.
pub(super) fn all_follow(t: u64, leader: NodeId, term: u64) -> Vec<Event> {
    (1..=5)
        .map(|n| {
            if n == leader {
                lead(t, n, term)
            } else {
                follow(t, n, term, Some(leader))
            }
        })
        .collect()
}
pub(super) fn window(start_ns: u64, end_ns: u64, groups: Vec<Vec<NodeId>>) -> FaultWindow {
    FaultWindow {
        start_ns,
        end_ns,
        label: "partition".into(),
        groups,
    }
}

pub(super) fn promise(node: NodeId, term: u64, from_ns: u64, lease_ns: u64) -> Promise {
    Promise {
        node,
        term,
        from_ns,
        until_ns: from_ns + lease_ns,
    }
}

// ---- Leased runs that fail one check alone (issue 28) ----

/// A quorum run that passes every check: node 1 leads term 1 throughout and answered one
/// promise (50 ms, lease 150 ms); follower 5 is cut off from 100 ms to the heal at 1 s; the
/// window ends at 3 s. Each fixture below breaks one check of it, and only that one.
pub(super) fn settled_leased_log() -> RunLog {
    let mut l = log(3 * S, all_follow(0, 1, 1));
    l.leased = true;
    l.fault_ns = Some(100 * MS);
    l.heal_ns = Some(S);
    l.faults = vec![window(100 * MS, S, vec![vec![5], vec![1, 2, 3, 4]])];
    l.promises = vec![promise(1, 1, 50 * MS, 150 * MS)];
    l
}

/// Only the event-log order fails: node 2's seq 2 (a candidacy at 1.5 s) is followed by its
/// seq 3 stamped at 1.4 s (following node 1 again). Read by stamp, node 2 would stay a
/// candidate to the end, and the run would fail as "never converged".
pub(super) fn time_back_log() -> RunLog {
    let mut l = settled_leased_log();
    l.events.push(Event {
        seq: 2,
        ..event(1500 * MS, 2, Role::Candidate, 2, None)
    });
    l.events.push(Event {
        seq: 3,
        ..follow(1400 * MS, 2, 2, Some(1))
    });
    l
}

/// Only C2 fails (with the runner's lease cap, lease 150 ms): leader 1 is paused from 200 ms
/// to 800 ms; node 2 leads term 2 from 500 ms, and 3, 4 and 5 follow it; node 1 resumes still
/// claiming and says it follows node 2 only at 1.5 s. The cap at the pause plus the lease
/// (350 ms) used to end node 1's claim before node 2's began.
pub(super) fn resumed_claim_log() -> RunLog {
    let mut l = settled_leased_log();
    l.events.push(lead(500 * MS, 2, 2));
    for n in 3..=4 {
        l.events.push(follow(550 * MS, n, 2, Some(2)));
    }
    l.events.push(follow(1100 * MS, 5, 2, Some(2)));
    l.events.push(follow(1500 * MS, 1, 2, Some(2)));
    l.procs = vec![
        proc_(200 * MS, 1, ProcKind::Pause),
        proc_(800 * MS, 1, ProcKind::Resume),
    ];
    l
}

/// Only C6 fails: node 1 also answered `leader` without `lease_ms` at 300 ms.
pub(super) fn unleased_answer_log() -> RunLog {
    let mut l = settled_leased_log();
    l.promises.push(Promise::unleased(1, 1, 300 * MS));
    l
}

/// Only C6 fails: no promise was observed, so none was judged.
pub(super) fn no_promise_log() -> RunLog {
    let mut l = settled_leased_log();
    l.promises.clear();
    l
}

/// Only C4 fails: the window ends 500 ms after the heal, the agreement on node 1 held no
/// whole second after it.
pub(super) fn short_agreement_log() -> RunLog {
    let mut l = settled_leased_log();
    l.end_ns = 1500 * MS;
    l
}
