//! Named roles: elections the cluster holds beside its own, each with the promise of
//! `/v1/claim` (docs/design/roles.md; the argument is docs/safety.md, "Roles"). Quorum mode only.
//! Every part is an I/O-free state machine or a pure function, stepped by the driver that owns
//! the quorum core:
//! - [`table`]: the durable facts (candidacies, grants, releases, revocations), applied from
//!   the replicated log, with the fencing tokens.
//! - [`holder`]: a node's claims on the roles it holds, renewed all at once by one renewal to
//!   the leader per beat.
//! - [`ledger`]: the leader's memory of renewals and stops, which decides when a grant is safe.
//! - [`planner`]: where roles should go (balanced, sticky, bounded).
//! - [`steward`]: all of it for one node, with what its renewals ask of the leader.
//! - [`feed`]: the grants, releases and revocations the node applied, for the watch stream.

pub mod feed;
pub mod holder;
pub mod ledger;
pub mod planner;
pub mod steward;
pub mod table;

pub use electd_client::{RoleName, Token};

/// A rule of docs/safety.md's "Roles" left out on purpose: the lab's broken variants
/// (`src/engine.rs`, `Flaws`; never set in the node), which the simulator and the chaos suite
/// must catch, as the model checker catches the same rules broken on these types
/// (`lab/src/model/roles.rs`, `RolesVariant`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RoleFlaw {
    /// R4 left out (`hasty-revoke`): a holder not renewed for F/6 is taken for dead, revoked,
    /// and its roles granted at once (`Steward::hasty_lead_ns`).
    HastyRevoke,
    /// R3 left out (`grant-in-first-lease`): a leadership's gate is its start, not its start +
    /// F, so it grants at once, and takes each holder it has not renewed yet for silent.
    GrantInFirstLease,
    /// R2 left out (`ignore-taken-at`): a holder uses a renewal's answer before its table has
    /// applied what the leader took from it, and claims a role the log took.
    IgnoreTakenAt,
    /// R5 left out (`release-at-once`): a holder releases a role it stopped claiming at once,
    /// while the promises it answered on it still run.
    ReleaseAtOnce,
    /// R1 left out (`claim-from-receipt`): a holder counts a renewal's claims from the instant
    /// its answer came, not the instant it was asked (`Holder::received`).
    ClaimFromReceipt,
    /// R6 left out (`reuse-token`): a grant takes the last token drawn again instead of the
    /// next, so that a role that changes hands keeps its token (`RoleTable::flawed`).
    ReuseToken,
}

impl RoleFlaw {
    pub const ALL: [RoleFlaw; 6] = [
        RoleFlaw::ClaimFromReceipt,
        RoleFlaw::HastyRevoke,
        RoleFlaw::GrantInFirstLease,
        RoleFlaw::IgnoreTakenAt,
        RoleFlaw::ReleaseAtOnce,
        RoleFlaw::ReuseToken,
    ];

    /// Its name on the lab's command lines (`electd-flawed --lab-flaw NAME`, `scripts/sim.sh
    /// --role-flaw NAME`).
    pub fn name(self) -> &'static str {
        match self {
            RoleFlaw::ClaimFromReceipt => "claim-from-receipt",
            RoleFlaw::HastyRevoke => "hasty-revoke",
            RoleFlaw::GrantInFirstLease => "grant-in-first-lease",
            RoleFlaw::IgnoreTakenAt => "ignore-taken-at",
            RoleFlaw::ReleaseAtOnce => "release-at-once",
            RoleFlaw::ReuseToken => "reuse-token",
        }
    }

    /// The flaw called `name`, if any.
    pub fn named(name: &str) -> Option<RoleFlaw> {
        RoleFlaw::ALL.into_iter().find(|f| f.name() == name)
    }
}
