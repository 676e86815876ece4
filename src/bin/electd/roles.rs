//! `electd roles` (quorum mode): every named role with its holder, token and candidates, and
//! where they are held, the placement `electd doctor` checks too.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use electd_client::NodeId;

use super::addr::Failed;
use super::client::{admin_failed, exit, json, NodeArgs};

/// One line per role: its name, holder and token, and its candidates.
fn roles_lines(roles: &[electd_client::RoleInfo]) -> String {
    let lines: Vec<String> = roles
        .iter()
        .map(|r| {
            let held = match (r.holder, r.token) {
                (Some(h), Some(t)) => format!("held by node {h} (token {t})"),
                _ => "free".to_string(),
            };
            format!("{}: {held}; candidates {:?}", r.name, r.candidates)
        })
        .collect();
    if lines.is_empty() {
        return "no roles".to_string();
    }
    lines.join("\n")
}

/// Every role, page by page (at most 1,000 pages of 1,000), from the first node of `args` that
/// answers.
pub(crate) async fn all_roles(args: &NodeArgs) -> Result<Vec<electd_client::RoleInfo>, Failed> {
    let mut all = Vec::new();
    let mut after: Option<electd_client::RoleName> = None;
    for _ in 0..1000 {
        let page = args
            .ask(|c| {
                let after = after.clone();
                async move { c.roles(after.as_ref(), 1000).await }
            })
            .await?;
        all.extend(page.roles);
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    Ok(all)
}

/// Where `roles` are held: how many each node holds, the roles free although some stand for
/// them, and holders that are not in `members` (when given); one line, and whether it is all
/// well (nothing free, no stranger).
pub(crate) fn placement(
    roles: &[electd_client::RoleInfo],
    members: Option<&BTreeSet<NodeId>>,
) -> (String, bool) {
    let mut load: BTreeMap<NodeId, usize> = BTreeMap::new();
    for h in roles.iter().filter_map(|r| r.holder) {
        *load.entry(h).or_default() += 1;
    }
    let free = (roles.iter())
        .filter(|r| r.holder.is_none() && !r.candidates.is_empty())
        .count();
    let strangers: Vec<String> = (load.keys())
        .filter(|h| members.is_some_and(|m| !m.contains(h)))
        .map(|h| h.to_string())
        .collect();
    let held: Vec<String> = (load.iter())
        .map(|(n, k)| format!("node {n} holds {k}"))
        .collect();
    let mut line = match (roles.len(), held.is_empty()) {
        (0, _) => "no named roles".to_string(),
        (n, true) => format!("{n} named roles, none held; {free} free with candidates"),
        (n, false) => format!(
            "{n} named roles: {}; {free} free with candidates",
            held.join(", ")
        ),
    };
    if !strangers.is_empty() {
        line.push_str(&format!(
            "; held by nodes that are no members: {}",
            strangers.join(", ")
        ));
    }
    (line, free == 0 && strangers.is_empty())
}

/// `electd roles`: every role, page by page, then where they are held; exit 0, or 3 when the
/// node's mode has no roles.
pub async fn roles(args: NodeArgs) -> ExitCode {
    let all = match all_roles(&args).await {
        Ok(all) => all,
        Err(f) => return admin_failed(&f),
    };
    let text = if args.json {
        json(&all)
    } else if all.is_empty() {
        roles_lines(&all)
    } else {
        format!(
            "{}
{}",
            roles_lines(&all),
            placement(&all, None).0
        )
    };
    println!("{text}");
    ExitCode::from(exit::OK)
}

/// [`placement`] of every role, as the first node of `args` that answers lists them, against
/// `members`; a line saying why when none could be read (not well).
pub(crate) async fn placement_of(
    args: &NodeArgs,
    members: &BTreeMap<NodeId, String>,
) -> (String, bool) {
    match all_roles(args).await {
        Ok(all) => placement(&all, Some(&members.keys().copied().collect())),
        Err(f) => (format!("not read: {f}"), false),
    }
}
