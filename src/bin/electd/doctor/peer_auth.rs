//! `electd doctor`'s `peer-auth` check: the peer requests each member refused between its two
//! reads, by reason (another secret, cluster id or certificate is a FAIL; a stranger or an
//! unknown reason a WARN), and the member that is likely the odd one out.

use electd_client::{NodeId, Status};

use super::report::{nodes, Level, Report};
use super::seen::{Second, Seen, SETTLE};

/// What a refusal reason says about the peer that was refused, and whether it is a mismatch of
/// configuration (FAIL) or something to look at (WARN); `None`: expected (the handshake after
/// a start).
fn refusal(reason: &str) -> Option<(Level, &'static str)> {
    Some(match reason {
        "stale_epoch" | "replayed" => return None,
        "bad_signature" => (
            Level::Fail,
            "requests signed with another cluster_secret (or altered on the way)",
        ),
        "answer_bad_signature" => (
            Level::Fail,
            "a peer's answers carry no valid MAC: another cluster_secret or cluster_id",
        ),
        "missing_auth" => (
            Level::Fail,
            "requests without proof: a peer runs without cluster_secret",
        ),
        "wrong_cluster" => (Level::Fail, "requests of another cluster_id"),
        "missing_cluster" => (Level::Fail, "requests that name no cluster"),
        "wrong_client_cert" => (
            Level::Fail,
            "a peer's TLS client certificate does not name its member id",
        ),
        "missing_client_cert" => (Level::Fail, "a peer presents no TLS client certificate"),
        "unknown_peer" => (
            Level::Warn,
            "requests of a node outside the membership (a removed member still running?)",
        ),
        _ => (Level::Warn, "see docs/security.md, \"Hardening\""),
    })
}

pub(super) fn peer_auth(report: &mut Report, up: &[&Seen]) {
    let mut refused = Vec::new();
    for s in up {
        let id = Some(s.member.id);
        let f = s.first().expect("up");
        let Some(Second {
            status: Ok(later), ..
        }) = &s.second
        else {
            continue; // said under `reachable`
        };
        let (worst, said) = refused_between(&f.status, later);
        if worst > Level::Ok {
            refused.push(s.member.id);
            report.add(
                "peer-auth",
                id,
                worst,
                format!(
                    "refused peer requests in the last {:.1} s: {}",
                    SETTLE.as_secs_f64(),
                    said.join(", ")
                ),
            );
        } else if later.insecure {
            report.add(
                "peer-auth",
                id,
                Level::Warn,
                "runs without a cluster secret (insecure = true): any process that reaches it \
                 may vote as a peer"
                    .to_string(),
            );
        } else {
            report.add(
                "peer-auth",
                id,
                Level::Ok,
                format!("no peer request refused in {:.1} s", SETTLE.as_secs_f64()),
            );
        }
    }
    if refused.is_empty() {
        return;
    }
    odd_one_out(report, up, &refused);
}

/// The peer requests a member refused between its two reads (`before`, `later`), by reason:
/// the worst level their reasons say, and a phrase per reason ("bad_signature +3 (…)").
fn refused_between(before: &Status, later: &Status) -> (Level, Vec<String>) {
    let before = &before.counters.rejected_peer_requests;
    let mut worst = Level::Ok;
    let mut said = Vec::new();
    for (reason, n) in &later.counters.rejected_peer_requests {
        let grew = n.saturating_sub(before.get(reason).copied().unwrap_or(0));
        if grew == 0 {
            continue;
        }
        if let Some((level, means)) = refusal(reason) {
            worst = worst.max(level);
            said.push(format!("{reason} +{grew} ({means})"));
        }
    }
    (worst, said)
}

/// Of the members that refused peer requests (`refused`), the ones that heard from none of
/// their peers, when the others do hear from theirs: a FAIL for the cluster that names them.
fn odd_one_out(report: &mut Report, up: &[&Seen], refused: &[NodeId]) {
    // The odd one out: refused, it heard from none of its peers since it started (every
    // request refused), while another member did hear from one.
    let deaf = |s: &&&Seen| {
        s.status()
            .is_some_and(|st| st.peers.iter().all(|p| p.last_contact_ms.is_none()))
    };
    let odd: Vec<NodeId> = up
        .iter()
        .filter(|s| refused.contains(&s.member.id))
        .filter(deaf)
        .map(|s| s.member.id)
        .collect();
    let others_hear = up.iter().any(|s| !odd.contains(&s.member.id) && !deaf(&s));
    if !odd.is_empty() && others_hear {
        let its = if odd.len() == 1 { "its" } else { "their" };
        report.add(
            "peer-auth",
            None,
            Level::Fail,
            format!(
                "{} heard from none of {its} peers since starting (each request refused), \
                 while the others hear from theirs: the likely odd one out; check {its} \
                 cluster_secret, cluster_id and TLS certificate",
                nodes(&odd),
            ),
        );
    }
}
