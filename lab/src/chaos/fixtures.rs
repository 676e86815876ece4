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
