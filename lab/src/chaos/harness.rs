//! The harness a scenario acts through: one live 5-node cluster, its fault state on the chosen
//! layer, and everything recorded for the checkers (process events, fault windows, the first
//! fault and the heal).
//!
//! Layers: `app` (each node's fault set over the admin API), `kernel` (iptables on per-node
//! loopback addresses, see [`super::kernel`]), `process` (signals only: S1, S2, S11; and the
//! nodes' wall clocks, S19). Delays
//! always come from the app layer: this kernel has no netem.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rand::rngs::StdRng;

use super::kernel::Chain;
use super::record::FaultWindow;
use crate::chaos::record::Recorder;
use crate::cluster::{Cluster, Shape};
use electd::clock::mono_ns;
use electd::config::Timing;
use electd_client::FaultSet;
use electd_client::Mode;
use electd_client::NodeId;
use electd_client::RoleName;

/// Where a run's faults live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    App,
    Kernel,
    Process,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::App => "app",
            Layer::Kernel => "kernel",
            Layer::Process => "process",
        }
    }
    pub fn parse(s: &str) -> Option<Layer> {
        match s {
            "app" => Some(Layer::App),
            "kernel" => Some(Layer::Kernel),
            "process" => Some(Layer::Process),
            _ => None,
        }
    }
}

/// A live run: the cluster, the fault state, and everything recorded for the checkers.
pub(super) struct Harness {
    pub(super) c: Cluster,
    pub(super) mode: Mode,
    pub(super) layer: Layer,
    pub(super) ips: BTreeMap<NodeId, String>,
    pub(super) chain: Option<Chain>,
    /// Directed cuts `from -> to`: messages from `from` to `to` are lost.
    pub(super) cuts: BTreeSet<(NodeId, NodeId)>,
    /// App layer: the cuts are written `block_from` on their receivers instead of `block_to`
    /// on their senders (the same cut, `docs/design/api-v1.md`; S8 writes it both ways).
    pub(super) cuts_on_receiver: bool,
    pub(super) loss: f64,
    pub(super) delays: BTreeMap<NodeId, u64>,
    pub(super) rec: Recorder,
    pub(super) faults: Vec<FaultWindow>,
    /// The fault window in force: start, label, and who could talk to whom when it opened.
    pub(super) open: Option<(u64, String, Vec<Vec<NodeId>>)>,
    pub(super) fault_ns: Option<u64>,
    pub(super) heal_ns: Option<u64>,
    pub(super) rng: StdRng,
    pub(super) timing: Timing,
    /// Nodes whose process ended without the scenario stopping it, and how (issue 48, item
    /// 6): each fails the run.
    pub(super) died: Vec<String>,
    /// Who votes: five voters, but in S26 three voters and two members that don't vote.
    pub(super) shape: Shape,
}

pub(super) const WAIT: Duration = Duration::from_secs(20);

/// The named roles every node of a quorum run stands for (issue 49): the checkers judge each
/// role's promises (C1, C2, C6 per role) in every scenario, whatever it faults.
pub const ROLES: [&str; 4] = ["chaos-1", "chaos-2", "chaos-3", "chaos-4"];

/// How often the role poller asks each node about each role of [`ROLES`]: 4 roles × 5 nodes
/// every 40 ms is as many questions as the cluster's own poller asks.
pub const ROLE_POLL_EVERY: Duration = Duration::from_millis(40);

/// [`ROLES`] as names.
pub fn roles() -> Vec<RoleName> {
    ROLES
        .iter()
        .map(|r| RoleName::new(*r).expect("a valid role name"))
        .collect()
}

/// The store of mutex mode in the harness's cuts: `(n, STORE)` loses node n's statements,
/// `(STORE, n)` the store's answers to n (node ids start at 1).
pub(super) const STORE: NodeId = 0;

impl Harness {
    pub(super) fn ids(&self) -> Vec<NodeId> {
        self.c.ids()
    }

    /// The first fault is in force from `t_ns` on (failover is measured from it).
    fn mark_fault(&mut self, t_ns: u64) {
        if self.fault_ns.is_none() {
            self.fault_ns = Some(t_ns);
        }
    }

    /// Records every node whose process ended by itself since the last look (its pid file
    /// still names it): a panic, an abort, an exit on an error, which no scenario causes.
    pub(super) fn note_exits(&mut self) {
        for id in self.ids() {
            if let Some(how) = self.c.exited(id) {
                let line = format!("node {id} exited by itself ({how})");
                if !self.died.iter().any(|d| d.starts_with(&line)) {
                    // Its log's last lines say why (the run's directory may not outlive it).
                    let log = std::fs::read_to_string(self.c.log_file(id)).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(5).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    self.died
                        .push(format!("{line}; its log ends: {}", tail.join(" | ")));
                }
            }
        }
    }

    pub(super) fn kill(&mut self, id: NodeId) {
        self.note_exits();
        if let Some(t) = self.rec.kill(&self.c, id) {
            self.mark_fault(t);
        }
    }

    pub(super) fn start(&mut self, id: NodeId) -> Result<(), String> {
        self.note_exits();
        self.rec
            .start(&self.c, id, self.mode)
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    pub(super) fn pause(&mut self, id: NodeId) {
        let t = self.rec.pause(&self.c, id);
        self.mark_fault(t);
    }

    pub(super) fn resume(&mut self, id: NodeId) {
        self.rec.resume(&self.c, id);
    }

    /// The leader the running voters agree on (members that don't vote name none while cut
    /// off or removed).
    pub(super) async fn leader(&self) -> Result<NodeId, String> {
        self.c
            .wait_agreed_among(&self.shape.voter_ids(), WAIT)
            .await
            .ok_or_else(|| "no agreed leader".to_string())
    }

    /// The leader every running node agrees on, members that don't vote included.
    pub(super) async fn all_agree(&self) -> Result<NodeId, String> {
        self.c
            .wait_agreed(WAIT)
            .await
            .ok_or_else(|| "no leader all the running nodes agree on".to_string())
    }

    /// Starts the members that don't vote (they join by themselves through node 1), and waits
    /// until each is a member and every node names the leader.
    pub(super) async fn start_nonvoters(&mut self) -> Result<(), String> {
        for id in self.shape.nonvoter_ids() {
            self.start(id)?;
        }
        for id in self.shape.nonvoter_ids() {
            self.until_member(id, true, WAIT).await?;
        }
        self.all_agree().await.map(drop)
    }

    /// Waits at most `limit` until the leader's committed membership names `id` as a member
    /// that doesn't vote (`member`) or no longer names it: how long it took. The voter sets
    /// must stay the voters meanwhile (N2: a join or a removal never changes them).
    pub(super) async fn until_member(
        &self,
        id: NodeId,
        member: bool,
        limit: Duration,
    ) -> Result<Duration, String> {
        let t0 = tokio::time::Instant::now();
        let voters = vec![self.shape.voter_ids()];
        let mut last = String::from("no membership read");
        while t0.elapsed() < limit {
            let Some(l) = self.c.wait_agreed_among(&voters[0], WAIT).await else {
                return Err("no agreed leader among the voters".into());
            };
            let client = self.c.client(l).map_err(|e| e.to_string())?;
            if let Ok(m) = client.members().await {
                if m.voter_sets != voters {
                    return Err(format!("N2: the voter sets changed: {:?}", m.voter_sets));
                }
                let named = m.members.iter().any(|x| x.id == id && !x.voter);
                if m.committed && named == member {
                    return Ok(t0.elapsed());
                }
                last = format!("{m:?}");
            }
            sleep(Duration::from_millis(50)).await;
        }
        let what = if member { "a member" } else { "removed" };
        Err(format!("node {id} not {what} after {limit:?}: {last}"))
    }

    /// Role `r` goes to node `id` whenever it is a live candidate (`PUT
    /// /v1/roles/{name}/preferred`, with the admin token).
    pub(super) async fn prefer(&self, r: &RoleName, id: NodeId) -> Result<(), String> {
        let l = self.leader().await?;
        let client = self.c.client(l).map_err(|e| e.to_string())?;
        let client = client.timeout(Duration::from_secs(6));
        client
            .prefer(r, Some(id))
            .await
            .map(drop)
            .map_err(|e| format!("{r} preferred on node {id}: {e}"))
    }

    /// A member that doesn't vote holding one of [`ROLES`], as the leader lists them (waited for
    /// at most a hold); the first such member when none does.
    pub(super) async fn nonvoter_holder(&self) -> NodeId {
        let nonvoters = self.shape.nonvoter_ids();
        let until = tokio::time::Instant::now() + self.hold();
        while tokio::time::Instant::now() < until {
            let held = self.role_holders().await.unwrap_or_default();
            if let Some(n) = held.values().find(|n| nonvoters.contains(n)) {
                return *n;
            }
            sleep(Duration::from_millis(50)).await;
        }
        nonvoters[0]
    }

    /// Who can talk to whom under the current cuts, as the checker's groups (pairs open both
    /// ways, singletons for cut-off nodes; none when no node is cut from another).
    fn groups(&self) -> Vec<Vec<NodeId>> {
        self.groups_with(&BTreeMap::new())
    }

    /// [`Self::groups`] with the links of `forgers` cut too (node n's forger on its links to
    /// those peers: everything on them that a node takes is refused).
    fn groups_with(&self, forgers: &BTreeMap<NodeId, BTreeSet<NodeId>>) -> Vec<Vec<NodeId>> {
        let forged = |a: NodeId, b: NodeId| forgers.get(&a).is_some_and(|to| to.contains(&b));
        let cut = |a, b| self.cuts.contains(&(a, b)) || forged(a, b) || forged(b, a);
        if self.cuts.iter().all(|(a, b)| *a == STORE || *b == STORE)
            && forgers.values().all(BTreeSet::is_empty)
        {
            return Vec::new();
        }
        let ids = self.ids();
        let mut g = Vec::new();
        for &a in &ids {
            let mut alone = true;
            for &b in &ids {
                if a != b && !cut(a, b) && !cut(b, a) {
                    alone = false;
                    if a < b {
                        g.push(vec![a, b]);
                    }
                }
            }
            if alone {
                g.push(vec![a]);
            }
        }
        g
    }

    /// Pushes the network fault state to the layer and opens a fault window labelled `label`.
    pub(super) async fn apply(&mut self, label: &str) -> Result<(), String> {
        self.close_window();
        match self.layer {
            Layer::Kernel => {
                let chain = self.chain.as_ref().ok_or("no iptables chain")?;
                let cuts: Vec<(String, String)> = self
                    .cuts
                    .iter()
                    .map(|(a, b)| (self.ips[a].clone(), self.ips[b].clone()))
                    .collect();
                let ips: Vec<String> = self.ips.values().cloned().collect();
                chain.set(&cuts, self.loss, &ips)?;
                self.push_app(true).await?;
            }
            _ => self.push_app(false).await?,
        }
        // The window starts once every rule is in force.
        let t = mono_ns();
        self.mark_fault(t);
        self.open = Some((t, label.to_string(), self.groups()));
        Ok(())
    }

    /// The app-layer fault sets: cuts and loss (unless the kernel does those) and delays.
    async fn push_app(&self, delays_only: bool) -> Result<(), String> {
        // A message crosses the sender's and the receiver's fault set: per-node loss r gives
        // link loss 1 - (1 - r)^2 = loss.
        let r = 1.0 - (1.0 - self.loss).sqrt();
        for id in self.ids() {
            if self.c.pid(id).is_none() {
                continue;
            }
            let cut_here = |on_receiver: bool| -> BTreeSet<NodeId> {
                if delays_only || on_receiver != self.cuts_on_receiver {
                    return BTreeSet::new();
                }
                self.cuts
                    .iter()
                    .filter(|(a, b)| if on_receiver { *b == id } else { *a == id })
                    .map(|(a, b)| if on_receiver { *a } else { *b })
                    .filter(|&peer| peer != STORE)
                    .collect()
            };
            let store_cut = |cut: (NodeId, NodeId)| !delays_only && self.cuts.contains(&cut);
            let set = FaultSet {
                block_to: cut_here(false),
                block_from: cut_here(true),
                drop_rate: if delays_only { 0.0 } else { r },
                delay_ms: self.delays.get(&id).copied().unwrap_or(0),
                block_to_store: store_cut((id, STORE)),
                block_from_store: store_cut((STORE, id)),
                ..FaultSet::default()
            };
            self.c
                .set_faults(id, &set)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    pub(super) fn close_window(&mut self) {
        // The groups of the window are those in force while it was open (taken when it
        // opened: by the time it closes, a flapping scenario has set the next cuts).
        if let Some((start, label, groups)) = self.open.take() {
            self.faults.push(FaultWindow {
                start_ns: start,
                end_ns: mono_ns(),
                label,
                groups,
            });
        }
    }

    /// Cuts every link between the groups, both ways.
    pub(super) async fn partition(&mut self, groups: &[Vec<NodeId>]) -> Result<(), String> {
        self.cuts.clear();
        for (i, g) in groups.iter().enumerate() {
            for (j, h) in groups.iter().enumerate() {
                if i != j {
                    for a in g {
                        for b in h {
                            self.cuts.insert((*a, *b));
                        }
                    }
                }
            }
        }
        let label = format!(
            "partition {}",
            groups
                .iter()
                .map(|g| g
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(","))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        self.apply(&label).await
    }

    /// Jumps node `id`'s wall clock to `offset_s` seconds from the host's (S19), and opens a
    /// fault window in which nobody is cut off; its label says how far the node's own clock
    /// read from this host's once it took the jump (`[wall clock read +60 s]`, from the `date`
    /// of its answers; issue 48, item 8: the jump was never read back), or that it never did
    /// within 2 s.
    pub(super) async fn jump_wall_clock(
        &mut self,
        id: NodeId,
        offset_s: i64,
    ) -> Result<(), String> {
        self.close_window();
        self.c
            .set_wall_clock(id, offset_s)
            .map_err(|e| e.to_string())?;
        self.open_window(&format!("wall clock of {id} {offset_s:+} s"));
        let read = self.wall_clock_read(id, offset_s).await;
        self.observed(&match read {
            Some(off) => format!("wall clock read {off:+} s"),
            None => "wall clock not read".into(),
        });
        Ok(())
    }

    /// How far node `id`'s wall clock reads from this host's (whole seconds, from the `date`
    /// header of its answers), once it is within 2 s of `want`; the last reading after 2 s
    /// otherwise, `None` when it never answered.
    async fn wall_clock_read(&self, id: NodeId, want: i64) -> Option<i64> {
        let http = self.c.http_for(Duration::from_millis(500)).ok()?;
        let scheme = if self.c.tls_ca().is_some() {
            "https"
        } else {
            "http"
        };
        let url = format!("{scheme}://{}/v1/health", self.c.member(id).ok()?.addr);
        let mut last = None;
        for _ in 0..40 {
            let res = http.get(&url).send().await.ok();
            let date = res
                .as_ref()
                .and_then(|r| r.headers().get("date")?.to_str().ok());
            if let Some(at) = date.and_then(|d| httpdate::parse_http_date(d).ok()) {
                let now = std::time::SystemTime::now();
                let off = match at.duration_since(now) {
                    Ok(ahead) => ahead.as_secs_f64().round() as i64,
                    Err(behind) => -(behind.duration().as_secs_f64().round() as i64),
                };
                last = Some(off);
                if (off - want).abs() <= 2 {
                    return last;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        last
    }

    /// Clears every network fault and sets every wall clock back; the next moment is the heal.
    pub(super) async fn heal(&mut self) -> Result<(), String> {
        self.close_window();
        if self.c.wall_clocks.is_some() {
            for id in self.ids() {
                self.c.set_wall_clock(id, 0).map_err(|e| e.to_string())?;
            }
        }
        if self.c.store_wall_clock.is_some() {
            self.store()?.set_wall_clock(0)?;
        }
        self.cuts.clear();
        self.loss = 0.0;
        self.delays.clear();
        if let Some(chain) = &self.chain {
            chain.set(&[], 0.0, &[])?;
        }
        for id in self.ids() {
            if self.c.pid(id).is_some() {
                self.c.clear_faults(id).await.map_err(|e| e.to_string())?;
            }
        }
        self.heal_ns = Some(mono_ns());
        Ok(())
    }

    /// Puts the forger (src/faults.rs) on node n's links to the peers of `forgers[n]`, on top
    /// of the app-layer faults in force, and opens a fault window labelled `label` in which
    /// those links are cut. [`Self::heal`] takes it off (it clears every fault set).
    pub(super) async fn forge(
        &mut self,
        forgers: &BTreeMap<NodeId, BTreeSet<NodeId>>,
        label: &str,
    ) -> Result<(), String> {
        let groups = self.groups_with(forgers);
        self.amend_faults(label, groups, |id, set| {
            if let Some(to) = forgers.get(&id) {
                set.forge_to = to.clone();
            }
        })
        .await
    }

    /// Changes each running node's fault set with `edit` (app layer, the cuts of the harness
    /// left as they are), opening a window labelled `label`.
    pub(super) async fn amend(
        &mut self,
        label: &str,
        edit: impl Fn(NodeId, &mut electd_client::wire::FaultSet),
    ) -> Result<(), String> {
        let groups = self.groups();
        self.amend_faults(label, groups, edit).await
    }

    /// Lifts every cut and puts the path `rules` in force in one step (app layer), opening a
    /// window labelled `label`: S25 heals a cut-off holder while the leader's appends to it
    /// stay lost, so that it never catches up in between.
    pub(super) async fn heal_but_paths(
        &mut self,
        rules: &BTreeMap<NodeId, Vec<electd_client::wire::PathFault>>,
        label: &str,
    ) -> Result<(), String> {
        self.cuts.clear();
        let groups = self.groups();
        self.amend_faults(label, groups, |id, set| {
            set.block_to.clear();
            set.block_from.clear();
            set.paths = rules.get(&id).cloned().unwrap_or_default();
        })
        .await
    }

    /// Sets each node's path faults (`FaultSet::paths`) to `rules[n]`, and every other
    /// running node's to none, on top of the app-layer faults in force, and opens a fault window
    /// labelled `label` (its groups: the cuts in force; a path fault cuts no link whole).
    /// [`Self::heal`] takes them off.
    pub(super) async fn path_faults(
        &mut self,
        rules: &BTreeMap<NodeId, Vec<electd_client::wire::PathFault>>,
        label: &str,
    ) -> Result<(), String> {
        let groups = self.groups();
        self.amend_faults(label, groups, |id, set| {
            set.paths = rules.get(&id).cloned().unwrap_or_default();
        })
        .await
    }

    /// Reads each running node's fault set, changes it with `edit`, puts it back (the
    /// forger's counts left out: they are answered, not set), and opens a fault window
    /// labelled `label` over `groups`.
    async fn amend_faults(
        &mut self,
        label: &str,
        groups: Vec<Vec<NodeId>>,
        edit: impl Fn(NodeId, &mut FaultSet),
    ) -> Result<(), String> {
        self.close_window();
        for id in self.ids() {
            if self.c.pid(id).is_none() {
                continue;
            }
            let client = self.c.client(id).map_err(|e| e.to_string())?;
            let mut set = client.faults().await.map_err(|e| e.to_string())?;
            let before = set.clone();
            edit(id, &mut set);
            if set == before {
                continue;
            }
            set.forger = None;
            self.c
                .set_faults(id, &set)
                .await
                .map_err(|e| e.to_string())?;
        }
        let t = mono_ns();
        self.mark_fault(t);
        self.open = Some((t, label.to_string(), groups));
        Ok(())
    }

    /// Vote requests the running nodes refused because a promise of theirs could still run
    /// (`votes_refused.promise`), summed; a node that does not answer is left out.
    pub(super) async fn votes_refused_in_promise(&self) -> u64 {
        let mut n = 0;
        for id in self.ids() {
            if self.c.pid(id).is_none() {
                continue;
            }
            if let Ok(s) = self.c.status(id).await {
                n += s
                    .counters
                    .votes_refused
                    .get("promise")
                    .copied()
                    .unwrap_or(0);
            }
        }
        n
    }

    /// Cuts `nodes` from the store (mutex mode), both ways, and opens a fault window.
    pub(super) async fn cut_from_store(
        &mut self,
        nodes: &[NodeId],
        label: &str,
    ) -> Result<(), String> {
        for &n in nodes {
            self.cuts.insert((n, STORE));
            self.cuts.insert((STORE, n));
        }
        let label = format!("{label}: {nodes:?}");
        self.apply(&label).await
    }

    fn store(&mut self) -> Result<&mut crate::cluster::Postgres, String> {
        self.c
            .store
            .as_mut()
            .ok_or_else(|| format!("{} mode has no store", self.mode.as_str()))
    }

    /// Opens a fault window labelled `label` that cuts nobody off (a fault of the store, of the
    /// wall clocks), from now on.
    fn open_window(&mut self, label: &str) {
        self.close_window();
        let t = mono_ns();
        self.mark_fault(t);
        self.open = Some((t, label.to_string(), Vec::new()));
    }

    /// SIGKILL to the store: a fault window until [`Self::start_store`] (which nobody is cut
    /// off in: the nodes still reach each other, and none reaches the store).
    pub(super) fn kill_store(&mut self) -> Result<(), String> {
        self.store()?.kill();
        self.open_window("store killed (SIGKILL)");
        Ok(())
    }

    /// The store started again on its data; the window of its kill ends as the start begins.
    pub(super) fn start_store(&mut self) -> Result<(), String> {
        self.close_window();
        self.store()?.start()
    }

    /// SIGSTOP to the store: a fault window until [`Self::resume_store`].
    pub(super) fn pause_store(&mut self) -> Result<(), String> {
        self.store()?.pause();
        self.open_window("store paused (SIGSTOP)");
        Ok(())
    }

    /// Deletes the lease row in the store, as an operator would by hand: a fault window, until
    /// the next one or the heal, whose label says which term's row went (`[row of term 4
    /// deleted]`; `[no row deleted]` when there was none).
    pub(super) fn delete_row(&mut self) -> Result<(), String> {
        let terms = self
            .store()?
            .sql("DELETE FROM electd_lease_v2 RETURNING term")?;
        let what = if terms.is_empty() {
            "no row deleted".to_string()
        } else {
            format!("row of term {terms} deleted")
        };
        self.open_window(&format!("the holder's row deleted [{what}]"));
        Ok(())
    }

    /// Steps the store's wall clock `offset_s` from the host's: a fault window, until the next
    /// one or the heal, whose label says how far the store's clock read from this host's
    /// right after (`[store clock read +60.0 s]`).
    pub(super) fn step_store_clock(&mut self, offset_s: i64) -> Result<(), String> {
        self.close_window();
        let store = self.store()?;
        store.set_wall_clock(offset_s)?;
        let read = store.wall_clock_offset_s()?;
        self.open_window(&format!(
            "store clock {offset_s:+} s [store clock read {read:+.1} s]"
        ));
        Ok(())
    }

    /// Node `id` resigns (the admin API, no successor named): a fault window that cuts nobody
    /// off, until the next one or the heal, whose label names the term given up (`node 3
    /// resigns [term 7 resigned]`), or the refusal (`[refused: …]`) when the node no longer led.
    pub(super) async fn resign(&mut self, id: NodeId) -> Result<(), String> {
        let client = self.c.client(id).map_err(|e| e.to_string())?;
        let what = match client.resign(None).await {
            Ok(r) => format!("term {} resigned", r.term),
            Err(e) => format!("refused: {e}"),
        };
        self.open_window(&format!("node {id} resigns [{what}]"));
        Ok(())
    }

    /// SIGCONT to the store; the window of its pause ends.
    pub(super) fn resume_store(&mut self) -> Result<(), String> {
        self.close_window();
        self.store()?.resume();
        Ok(())
    }

    /// Adds what the harness saw of the fault in force to its window's label, in brackets
    /// (`"30% loss on all links [1210 of 4034 peer requests lost]"`): the run log, the report and
    /// the timeline then show that the fault took effect, and the chaos tests check it.
    pub(super) fn observed(&mut self, what: &str) {
        if let Some((_, label, _)) = &mut self.open {
            label.push_str(&format!(" [{what}]"));
        }
    }

    /// Peer requests sent and received so far, summed over the running nodes' counters (a
    /// request is counted sent before the fault layer can lose it, received once it got past
    /// the receiver's fault layer). A node that does not answer is left out.
    pub(super) async fn peer_requests(&self) -> (u64, u64) {
        let (mut sent, mut received) = (0, 0);
        for id in self.ids() {
            if self.c.pid(id).is_none() {
                continue;
            }
            if let Ok(s) = self.c.status(id).await {
                sent += s.counters.total_sent();
                received += s.counters.messages_received.values().sum::<u64>();
            }
        }
        (sent, received)
    }

    /// What the forgers did so far and what it cost them, summed over the running nodes
    /// (the counts of each node's fault set, `forger`; the answers refused unsigned,
    /// `rejected_peer_requests.answer_bad_signature`, and the requests refused as not signed
    /// by their sender, `bad_signature`). A node that does not answer is left out.
    pub(super) async fn forger_counts(&self) -> ForgerTally {
        let mut t = ForgerTally::default();
        for id in self.ids() {
            if self.c.pid(id).is_none() {
                continue;
            }
            if let Ok(s) = self.c.status(id).await {
                let f = s.faults.forger.unwrap_or_default();
                t.forged += f.forged;
                t.replayed += f.replayed;
                t.withheld += f.withheld;
                t.rewritten += f.rewritten;
                let refused = |why: &str| {
                    s.counters
                        .rejected_peer_requests
                        .get(why)
                        .copied()
                        .unwrap_or(0)
                };
                t.answers_refused += refused("answer_bad_signature");
                t.requests_refused += refused("bad_signature");
            }
        }
        t
    }

    /// Node `id`'s probe round trips so far (`/metrics`, `probe_round_trip_seconds`): how many
    /// were acknowledged, and their sum in seconds; `None` when it does not answer.
    pub(super) async fn probe_round_trips(&self, id: NodeId) -> Option<(u64, f64)> {
        let text = self.c.client(id).ok()?.metrics_text().await.ok()?;
        let value = |suffix: &str| {
            text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
                let (name, v) = l.split_once(' ')?;
                name.ends_with(&format!("probe_round_trip_seconds_{suffix}"))
                    .then(|| v.trim().parse::<f64>().ok())
                    .flatten()
            })
        };
        Some((value("count")? as u64, value("sum")?))
    }

    /// Every node stands for every role of [`ROLES`] (each asked on the node itself), then
    /// waits until each role is held: its holder, as the leader lists it, answers its claim.
    pub(super) async fn stand_roles(&self) -> Result<(), String> {
        for r in roles() {
            for id in self.ids() {
                self.stand(&r, id, true).await?;
            }
        }
        let until = tokio::time::Instant::now() + WAIT;
        loop {
            let held = self.role_holders().await.unwrap_or_default();
            let mut claimed = 0;
            for (r, h) in &held {
                let client = self.c.client(*h).map_err(|e| e.to_string())?;
                claimed += matches!(client.role_claim(r).await, Ok((true, _))) as usize;
            }
            if claimed == ROLES.len() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= until {
                return Err(format!(
                    "{claimed} of {} roles held after {WAIT:?}",
                    ROLES.len()
                ));
            }
            sleep(Duration::from_millis(50)).await;
        }
    }

    /// Node `id` stands for role `r` (`stands`) or withdraws, asked on the node itself.
    async fn stand(&self, r: &RoleName, id: NodeId, stands: bool) -> Result<(), String> {
        let client = self.c.client(id).map_err(|e| e.to_string())?;
        let client = client.timeout(Duration::from_secs(6));
        client
            .stand(r, id, stands)
            .await
            .map(drop)
            .map_err(|e| format!("node {id} stands for {r} ({stands}): {e}"))
    }

    /// Node `id` withdraws from role `r` (a planned hand-over: the node stops claiming before
    /// the release commits), said in the label of the fault window in force.
    pub(super) async fn withdraw(&mut self, r: &RoleName, id: NodeId) -> Result<(), String> {
        self.stand(r, id, false).await?;
        self.observed(&format!("node {id} withdraws from {r}"));
        Ok(())
    }

    /// Node `id` stands for role `r` again.
    pub(super) async fn stand_again(&self, r: &RoleName, id: NodeId) -> Result<(), String> {
        self.stand(r, id, true).await
    }

    /// The holders of the roles of [`ROLES`] as the agreed leader lists them.
    pub(super) async fn role_holders(&self) -> Result<BTreeMap<RoleName, NodeId>, String> {
        let l = self.leader().await?;
        let client = self.c.client(l).map_err(|e| e.to_string())?;
        let page = client.roles(None, 100).await.map_err(|e| e.to_string())?;
        let ours = roles();
        Ok(page
            .roles
            .into_iter()
            .filter(|r| ours.contains(&r.name))
            .filter_map(|r| Some((r.name, r.holder?)))
            .collect())
    }

    pub(super) fn others(&self, not: &[NodeId]) -> Vec<NodeId> {
        self.ids()
            .into_iter()
            .filter(|i| !not.contains(i))
            .collect()
    }

    pub(super) fn hold(&self) -> Duration {
        // Long enough for many follower leases on each side: 3 s at the default timings, as
        // with the timings of earlier reports.
        Duration::from_millis(20 * self.timing.follower_lease_ms)
    }
}

/// The forgers' counts summed over the nodes ([`Harness::forger_counts`]).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ForgerTally {
    pub forged: u64,
    pub replayed: u64,
    pub withheld: u64,
    pub rewritten: u64,
    pub answers_refused: u64,
    pub requests_refused: u64,
}

impl ForgerTally {
    /// What happened between `before` and `self`.
    pub fn since(self, before: ForgerTally) -> ForgerTally {
        ForgerTally {
            forged: self.forged.saturating_sub(before.forged),
            replayed: self.replayed.saturating_sub(before.replayed),
            withheld: self.withheld.saturating_sub(before.withheld),
            rewritten: self.rewritten.saturating_sub(before.rewritten),
            answers_refused: self.answers_refused.saturating_sub(before.answers_refused),
            requests_refused: self
                .requests_refused
                .saturating_sub(before.requests_refused),
        }
    }
}

pub(super) async fn sleep(d: Duration) {
    tokio::time::sleep(d).await
}
