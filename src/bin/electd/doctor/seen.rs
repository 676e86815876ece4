//! What `electd doctor` read of each member: its first answers, those a second later, or why
//! it said nothing.

use std::time::Duration;

use electd_client::{Error, Event, Health, LeaderInfo, Members, NodeId, Status};

/// Between the two reads of every member's counters (and the settle before views compare).
pub(super) const SETTLE: Duration = Duration::from_secs(1);

/// A member as the cluster names it.
#[derive(Clone, Debug)]
pub(super) struct Member {
    pub(super) id: NodeId,
    pub(super) addr: String,
    /// A voter (false: a member that does not vote, which the cluster does without: one that
    /// does not answer is a warning, and the leader removes it after its absence).
    pub(super) voter: bool,
}

/// What a member answered first.
pub(super) struct First {
    pub(super) status: Status,
    pub(super) took: Duration,
    pub(super) health: Result<Health, Error>,
    /// `GET /v1/members` (quorum mode only).
    pub(super) members: Option<Result<Members, Error>>,
    /// The latest event of its log (`None`: none recorded yet), or why it could not be read.
    pub(super) last_event: Result<Option<Event>, String>,
}

/// What it answered a second later.
pub(super) struct Second {
    pub(super) status: Result<Status, Error>,
    pub(super) leader: Result<LeaderInfo, Error>,
}

/// What one member said, or why it said nothing.
pub(super) struct Seen {
    pub(super) member: Member,
    pub(super) first: Result<First, Error>,
    pub(super) second: Option<Second>,
}

impl Seen {
    pub(super) fn first(&self) -> Option<&First> {
        self.first.as_ref().ok()
    }

    /// Its latest status: the second read's, else the first's.
    pub(super) fn status(&self) -> Option<&Status> {
        match &self.second {
            Some(Second { status: Ok(s), .. }) => Some(s),
            _ => self.first().map(|f| &f.status),
        }
    }

    /// Its latest view: the second read's `/v1/leader`, else its latest status.
    pub(super) fn view(&self) -> Option<&LeaderInfo> {
        match &self.second {
            Some(Second { leader: Ok(l), .. }) => Some(l),
            _ => self.status().map(|s| &s.leader),
        }
    }
}
