//! Quorum mode's named roles as the node serves them (docs/design/roles.md): the list, a claim
//! on a role, a candidacy change, a resign, and the leader's side of a renewal. Each reads the
//! applied table (`Store::roles`) and the node's [`Steward`] (roles/steward.rs) at one instant;
//! what goes to the leader goes in this node's next renewal (the driver's roles turn,
//! `driver/roles.rs`), and a change is answered once this node's own table has applied it.

use std::time::Duration;

use crate::clock::ms;
use crate::config::Timing;
use crate::engine::{Flaws, RoleCounts, RolesError, RolesQuery, RolesReply, RolesRequest};
use crate::error::REQUEST_TIMEOUT;
use crate::quorum::core::{Answer, Input};
use crate::quorum::node::QuorumNode;
use crate::role::NodeId;
use crate::roles::holder::Renewed;
use crate::roles::steward::{Knobs, RenewRequest, Resigning, RolesAnswer, RolesAsk, Steward};
use crate::roles::table::{RoleTable, Setting};
use electd_client::{
    NodeRoleLimit, RoleClaimInfo, RoleInfo, RoleName, RoleResigned, RolesPage, Token,
};

/// The most roles one page of `GET /v1/roles` lists (and its default).
pub const PAGE_MAX: usize = 1000;

/// The most planned moves one leader's turn starts (one turn a beat).
const MOVES_PER_TURN: usize = 8;

/// How long a change waits to be applied before it is answered `NotApplied`: within the API's
/// request timeout.
const APPLY_WAIT: Duration = Duration::from_millis(REQUEST_TIMEOUT.as_millis() as u64 - 1000);

/// The steward of node `me` with the config's timings: claims of L from a renewal's send
/// instant, the leader's waits of F, a moved role's holder given F past its promises.
pub(crate) fn new_steward(me: NodeId, t: &Timing, flaws: &Flaws, started_ns: u64) -> Steward {
    let f = ms(t.follower_lease_ms);
    let knobs = Knobs {
        max_moves: MOVES_PER_TURN,
        release_grace_ns: f,
        flaw: flaws.role_flaw(),
    };
    Steward::new(me, (ms(t.effective_lease_ms()), f), knobs, started_ns)
}

/// One role's line of the list.
fn info(name: &RoleName, table: &RoleTable) -> RoleInfo {
    let r = table.get(name).cloned().unwrap_or_default();
    RoleInfo {
        name: name.clone(),
        candidates: r.candidates.into_iter().collect(),
        holder: r.holder.map(|(n, _)| n),
        token: r.holder.map(|(_, t)| t),
        preferred: r.preferred,
    }
}

/// Serves a request about roles (the node's one entry for them: `Engine::roles`).
pub(super) async fn serve(node: &QuorumNode, req: RolesRequest) -> Result<RolesReply, RolesError> {
    Ok(match req {
        RolesRequest::List(q) => RolesReply::Page(roles_page(node, &q)),
        RolesRequest::Claim(name) => {
            let (holds, info) = claim_role(node, &name).await?;
            RolesReply::Claim(holds, info)
        }
        RolesRequest::Stand {
            name,
            node: who,
            stands,
        } => RolesReply::Role(stand_for(node, name, who, stands).await?),
        RolesRequest::Resign { name, token } => {
            RolesReply::Resigned(resign_role(node, name, token).await?)
        }
        RolesRequest::Prefer { name, node: to } => RolesReply::Role(prefer(node, name, to).await?),
        RolesRequest::Limit {
            node: who,
            max_roles,
        } => {
            if let Some(max_roles) = max_roles {
                let limit = Setting::Limit {
                    node: who,
                    max_roles,
                };
                if !settle(node, limit).await? {
                    return Err(RolesError::LimitNotApplied(who));
                }
            }
            RolesReply::Limit(node.store.roles(|t| NodeRoleLimit {
                node: who,
                max_roles: t.max_roles(who),
                held: t.count_held_by(who) as u64,
            }))
        }
        RolesRequest::Counts => {
            let claimed = match ask(node, RolesAsk::Claimable).await {
                Some(RolesAnswer::Claimable(n)) => n,
                _ => 0,
            };
            RolesReply::Counts(node.store.roles(|t| RoleCounts {
                roles: t.len() as u64,
                held: t.holders().map(|h| t.count_held_by(h) as u64).sum(),
                mine: t.count_held_by(node.id) as u64,
                claimed,
                grants: t.last_token(),
            }))
        }
    })
}

/// Asks the driver to step the steward with `ask` (driver/roles.rs); `None` once the driver
/// has stopped.
async fn ask(node: &QuorumNode, ask: RolesAsk) -> Option<RolesAnswer> {
    match node.ask(Input::Roles(ask)).await {
        Some(Answer::Roles(a)) => Some(a),
        _ => None,
    }
}

/// The leader's side of `from`'s renewal (R2): answered only while this node leads with its
/// claim holding, in the term its ledger leads.
pub(super) async fn renew_for(
    node: &QuorumNode,
    from: NodeId,
    req: RenewRequest,
) -> Option<Renewed> {
    match ask(node, RolesAsk::Renew { from, req }).await {
        Some(RolesAnswer::Renewed(r)) => r,
        _ => None,
    }
}

/// `GET /v1/roles`: a page of the applied table.
fn roles_page(node: &QuorumNode, q: &RolesQuery) -> RolesPage {
    let limit = q.limit.unwrap_or(PAGE_MAX).clamp(1, PAGE_MAX);
    let prefix = q.prefix.as_deref().unwrap_or("");
    let after = q.after.as_deref().unwrap_or("");
    node.store.roles(|t| {
        let mut names = t
            .iter()
            .map(|(n, _)| n)
            .filter(|n| n.as_str() > after && n.as_str().starts_with(prefix));
        let roles: Vec<RoleInfo> = names.by_ref().take(limit).map(|n| info(n, t)).collect();
        let next = names
            .next()
            .and_then(|_| roles.last().map(|r| r.name.clone()));
        RolesPage { roles, next }
    })
}

/// `GET /v1/claim/{name}`: this node's claim on `name` now.
async fn claim_role(
    node: &QuorumNode,
    name: &RoleName,
) -> Result<(bool, RoleClaimInfo), RolesError> {
    let claim = match ask(node, RolesAsk::Claim(name.clone())).await {
        Some(RolesAnswer::Claim(c)) => c,
        _ => return Err(RolesError::Stopping),
    };
    // Read after the claim was judged: `lease_ms` counts from now, so it promises no more.
    let now = node.clock.boot_ns();
    let holder = node.store.roles(|t| t.get(name).map(|r| r.holder));
    let Some(holder) = holder else {
        return Err(RolesError::UnknownRole(name.clone()));
    };
    Ok(match claim {
        Some(c) => (
            true,
            RoleClaimInfo {
                name: name.clone(),
                node: Some(node.id),
                token: Some(c.token),
                lease_ms: c.until_ns.saturating_sub(now) / 1_000_000,
            },
        ),
        None => (
            false,
            RoleClaimInfo {
                name: name.clone(),
                node: holder.map(|(n, _)| n),
                token: holder.map(|(_, t)| t),
                lease_ms: 0,
            },
        ),
    })
}

/// `who` stands for `name` (or withdraws): asked in this node's renewals until its table
/// shows it; answered then, with the role's line.
async fn stand_for(
    node: &QuorumNode,
    name: RoleName,
    who: NodeId,
    stands: bool,
) -> Result<RoleInfo, RolesError> {
    let want = RolesAsk::Want {
        role: name.clone(),
        node: who,
        stands,
    };
    // Asked first: a withdrawal also cancels a candidacy asked and not yet applied.
    ask(node, want).await.ok_or(RolesError::Stopping)?;
    if !stands && node.store.roles(|t| t.get(&name).is_none()) {
        return Err(RolesError::UnknownRole(name));
    }
    let applied = until_applied(node, |t| Steward::shows(t, &name, who, stands)).await;
    if !applied {
        return Err(RolesError::NotApplied(name));
    }
    Ok(node.store.roles(|t| info(&name, t)))
}

/// Asks for `setting` (in this node's renewals until its table shows it); whether it was
/// applied within [`APPLY_WAIT`].
async fn settle(node: &QuorumNode, setting: Setting) -> Result<bool, RolesError> {
    let shown = setting.clone();
    ask(node, RolesAsk::Set(setting))
        .await
        .ok_or(RolesError::Stopping)?;
    Ok(until_applied(node, |t| shown.shown_in(t)).await)
}

/// `PUT`/`DELETE /v1/roles/{name}/preferred`: the role's preferred node, answered once applied
/// with the role's line.
async fn prefer(
    node: &QuorumNode,
    name: RoleName,
    to: Option<NodeId>,
) -> Result<RoleInfo, RolesError> {
    if node.store.roles(|t| t.get(&name).is_none()) {
        return Err(RolesError::UnknownRole(name));
    }
    let setting = Setting::Prefer {
        role: name.clone(),
        node: to,
    };
    if !settle(node, setting).await? {
        return Err(RolesError::NotApplied(name));
    }
    Ok(node.store.roles(|t| info(&name, t)))
}

/// `POST /v1/roles/{name}/resign`: this node stops claiming its grant `token` of `name`,
/// and answers once the release is applied (R5: after its promises ended).
async fn resign_role(
    node: &QuorumNode,
    name: RoleName,
    token: Token,
) -> Result<RoleResigned, RolesError> {
    let resigning = match ask(
        node,
        RolesAsk::Resign {
            role: name.clone(),
            token,
        },
    )
    .await
    {
        Some(RolesAnswer::Resigning(r)) => r,
        _ => return Err(RolesError::Stopping),
    };
    let me = node.id;
    match resigning {
        Resigning::Stale(current) => {
            return Err(RolesError::StaleToken {
                role: name,
                given: token,
                current,
            })
        }
        Resigning::Released => {}
        Resigning::Stopped => {
            let gone = |t: &RoleTable| t.holder(&name) != Some((me, token));
            if !until_applied(node, gone).await {
                return Err(RolesError::NotApplied(name));
            }
            let released = RolesAsk::Released {
                role: name.clone(),
                token,
            };
            ask(node, released).await.ok_or(RolesError::Stopping)?;
        }
    }
    Ok(RoleResigned {
        name,
        token,
        released: true,
    })
}

/// Waits until the applied table satisfies `done`, at most [`APPLY_WAIT`]; whether it did.
async fn until_applied(node: &QuorumNode, done: impl Fn(&RoleTable) -> bool) -> bool {
    let mut applied = node.raft.metrics();
    let deadline = tokio::time::Instant::now() + APPLY_WAIT;
    loop {
        if node.store.roles(&done) {
            return true;
        }
        match tokio::time::timeout_at(deadline, applied.changed()).await {
            Ok(Ok(())) => {}
            // Stopped, or out of time: one last look.
            _ => return node.store.roles(&done),
        }
    }
}
