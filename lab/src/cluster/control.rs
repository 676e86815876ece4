//! The members' API through the typed client: `/v1/leader`, `/v1/status`, fault sets,
//! partitions and heals.

use std::collections::BTreeSet;

use electd_client::{Client, Event, FaultSet, LeaderInfo, Mode, NodeId, Status};

use super::dir::{Cluster, CtlError};

impl Cluster {
    /// The API client of node `id` (with the admin token, when the cluster has one).
    pub fn client(&self, id: NodeId) -> Result<Client, CtlError> {
        Ok(self
            .client_on(self.http.clone(), id)?
            .admin_token(self.admin_token()))
    }

    /// `GET /v1/leader` of node `id`.
    pub async fn leader_info(&self, id: NodeId) -> Result<LeaderInfo, CtlError> {
        Ok(self.client(id)?.leader().await?)
    }

    /// The named roles node `id` claims now (`electd_roles_claimed` of its `/metrics`), asked
    /// through `http`; `None` when it does not answer.
    pub async fn roles_claimed(&self, http: reqwest::Client, id: NodeId) -> Option<u64> {
        let text = self.client_on(http, id).ok()?.metrics_text().await.ok()?;
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("electd_roles_claimed "))?;
        line.trim().parse().ok()
    }

    /// `GET /v1/status` of node `id`.
    pub async fn status(&self, id: NodeId) -> Result<Status, CtlError> {
        Ok(self.client(id)?.status().await?)
    }

    /// Every node's events of `mode`, read from their `events.jsonl` files (which survive
    /// kills). Panics on what cannot be read ([`Cluster::events_checked`]): a test or a
    /// benchmark must not judge part of a log as if it were all of it.
    pub fn events(&self, mode: Mode) -> Vec<Event> {
        let (events, problems) = self.events_checked(mode);
        assert!(
            problems.is_empty(),
            "event logs not read whole: {problems:?}"
        );
        events
    }

    /// Every node's events of `mode`, and what could not be read: a file that exists and cannot
    /// be read, lines that are not events (issue 48, item 7; they were dropped unseen). A node
    /// that never started has no file, and no events.
    pub fn events_checked(&self, mode: Mode) -> (Vec<Event>, Vec<String>) {
        let mut events = Vec::new();
        let mut problems = Vec::new();
        for id in self.ids() {
            let path = self.data_dir(mode, id).join(electd::EVENTS_FILE);
            match electd::read_events_counted(&path) {
                Ok((evs, bad)) => {
                    if bad > 0 {
                        problems.push(format!(
                            "node {id}: {bad} lines of {} are not events",
                            path.display()
                        ));
                    }
                    events.extend(evs);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => problems.push(format!("node {id}: {}: {e}", path.display())),
            }
        }
        (events, problems)
    }

    pub async fn set_faults(&self, id: NodeId, set: &FaultSet) -> Result<FaultSet, CtlError> {
        Ok(self.client(id)?.set_faults(set).await?)
    }

    pub async fn clear_faults(&self, id: NodeId) -> Result<FaultSet, CtlError> {
        Ok(self.client(id)?.clear_faults().await?)
    }

    /// Cuts all peer traffic between the groups (each listed node's fault set). Nodes in no
    /// group are left alone.
    pub async fn partition(&self, groups: &[Vec<NodeId>]) -> Result<(), CtlError> {
        for g in groups {
            for id in g {
                self.member(*id)?;
            }
        }
        for (gi, g) in groups.iter().enumerate() {
            let others: BTreeSet<NodeId> = groups
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != gi)
                .flat_map(|(_, o)| o.iter().copied())
                .collect();
            for id in g {
                if self.pid(*id).is_none() {
                    continue;
                }
                let set = FaultSet {
                    block_to: others.clone(),
                    block_from: others.clone(),
                    ..Default::default()
                };
                self.set_faults(*id, &set).await?;
            }
        }
        Ok(())
    }

    /// Clears every running node's fault set.
    pub async fn heal(&self) -> Result<(), CtlError> {
        for m in &self.members {
            if self.pid(m.id).is_some() {
                self.clear_faults(m.id).await?;
            }
        }
        Ok(())
    }
}
