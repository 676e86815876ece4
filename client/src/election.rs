//! [`Election`]: the cluster's claim or a named role as a promise kept on a local timer, for an
//! application that links this crate (the Python and Go clients under `clients/` keep the same
//! rules; docs/applications.md, "Client libraries").
//!
//! A node that answers `GET /v1/claim` (or `GET /v1/claim/{name}`) with 200 and `lease_ms` `m`
//! to a question sent at instant `s` holds its claim until `s + m`, whatever happens after. So
//! the deadline counts from a clock read *before* the request is sent, never from the answer's
//! arrival; it is kept on `CLOCK_BOOTTIME` ([`boot_ns`]), which counts a suspended host's sleep
//! as the node's lease does; and a timer of the election's own ends the holding at the deadline
//! even when the network says nothing. The deadline is the end of the latest promise *of one
//! token* (the cluster's term, a role's grant), less a margin the application needs to stop:
//! an answer with another token never extends it, and the old holding ends before the new one
//! begins. [`Promise`] is that arithmetic without
//! I/O; [`Election`] asks the node and steps it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{Client, Error, NodeId, RoleName, Token};

/// Now on `CLOCK_BOOTTIME`, in nanoseconds.
pub fn boot_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// A holding of `token` began (`elected`) or ended, between `begun_ns` (the first claiming
/// answer heard) and `ended_ns` (its last promise's end, or the instant the node said it no
/// longer claims or the application resigned). Two nodes' holdings never overlap: the later
/// node's claim began after the earlier node's promise ended, before its answer was heard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    pub elected: bool,
    pub token: Token,
    pub begun_ns: u64,
    pub ended_ns: u64,
}

/// What the node's answers promise, without I/O: fed with every answer, the instant its
/// question was sent and now (ns of one clock); says when a holding begins and ends. Once the
/// application has resigned a token ([`Promise::resign`]), answers with that token or an older
/// one claim nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Promise {
    /// The token of the running holding, or of the last one.
    pub token: Option<Token>,
    pub begun_ns: u64,
    /// The end of the latest promise of `token`, less `margin_ns`.
    pub deadline_ns: u64,
    /// What the application needs to stop acting once told: the holding ends this long before
    /// the promise does.
    pub margin_ns: u64,
    holding: bool,
    resigned: Option<Token>,
}

impl Promise {
    /// Whether a promise runs at `now_ns`.
    pub fn held(&self, now_ns: u64) -> bool {
        self.holding && now_ns < self.deadline_ns
    }

    /// The answer to a question sent at `sent_ns`: the node claims (with `token` and
    /// `lease_ms`) or not. A refusal ends the holding at once; a claim with another token ends
    /// the old holding and begins a new one; a claim with the same token extends the deadline
    /// to `sent_ns + lease_ms`, never beyond.
    pub fn answered(
        &mut self,
        sent_ns: u64,
        now_ns: u64,
        claim: Option<(Token, u64)>,
    ) -> Vec<Change> {
        let mut out = self.expire(now_ns);
        let resigned = self.resigned;
        let claim = claim.filter(|(t, l)| *l > 0 && resigned.is_none_or(|r| *t > r));
        let Some((token, lease_ms)) = claim else {
            out.extend(self.end(now_ns));
            return out;
        };
        let end = (sent_ns + lease_ms * 1_000_000).saturating_sub(self.margin_ns);
        if self.holding && self.token != Some(token) {
            out.extend(self.end(now_ns));
        }
        if end <= now_ns {
            return out;
        }
        if self.holding {
            self.deadline_ns = self.deadline_ns.max(end);
            return out;
        }
        (self.holding, self.token) = (true, Some(token));
        (self.begun_ns, self.deadline_ns) = (now_ns, end);
        out.push(self.change(true));
        out
    }

    /// The holding ends if its deadline has come.
    pub fn expire(&mut self, now_ns: u64) -> Vec<Change> {
        if self.holding && now_ns >= self.deadline_ns {
            self.holding = false;
            return vec![self.change(false)];
        }
        Vec::new()
    }

    /// The holding ends now (a refusal, a new token, a resign), if it runs.
    pub fn end(&mut self, now_ns: u64) -> Vec<Change> {
        let mut out = self.expire(now_ns);
        if self.holding {
            self.holding = false;
            self.deadline_ns = self.deadline_ns.min(now_ns);
            out.push(self.change(false));
        }
        out
    }

    /// The holding ends now, and the token to give up: the last one heard, even when its
    /// promise has run out here (the node may still hold the grant). No answer with that token
    /// or an older one begins a holding again, not even one to a question sent before.
    pub fn resign(&mut self, now_ns: u64) -> (Vec<Change>, Option<Token>) {
        self.resigned = self.token.max(self.resigned);
        (self.end(now_ns), self.token)
    }

    /// Takes back a resign of `token` that the node did not take (it failed): the node still
    /// holds the grant, and its answers may begin a holding again.
    pub fn unresign(&mut self, token: Token) {
        if self.resigned == Some(token) {
            self.resigned = None;
        }
    }

    fn change(&self, elected: bool) -> Change {
        Change {
            elected,
            token: self.token.unwrap_or(0),
            begun_ns: self.begun_ns,
            ended_ns: self.deadline_ns,
        }
    }
}

/// How an [`Election`] asks.
#[derive(Clone, Debug)]
pub struct ElectionOptions {
    /// Stand the node for the role at the start, withdraw it (and give the role up) at the stop.
    pub stand: bool,
    /// How often the node is asked.
    pub poll: Duration,
    /// The longest a question waits (less when the running promise has less left).
    pub timeout: Duration,
    /// What the application needs to stop acting once told: a holding ends this long before
    /// its promise does (as `electd run` kills its command 5 ms before the deadline).
    pub margin: Duration,
}

impl Default for ElectionOptions {
    fn default() -> ElectionOptions {
        ElectionOptions {
            stand: true,
            poll: Duration::from_millis(20),
            timeout: Duration::from_secs(1),
            margin: Duration::from_millis(5),
        }
    }
}

struct Shared {
    client: Client,
    name: Option<RoleName>,
    node: NodeId,
    opts: ElectionOptions,
    clock: fn() -> u64,
    state: Mutex<(Promise, Vec<Change>)>,
    /// How many times a holding began or ended, and the running holding's token (`None` while
    /// none runs): a holding that ends and begins again under the same token is another one.
    holding: watch::Sender<(u64, Option<Token>)>,
    /// The election stopped: no answer begins a holding (one may still be stepped on another
    /// worker as the tasks are aborted).
    stopped: AtomicBool,
}

/// The cluster's election (`name` `None`) or the named role `name`, as seen from the node the
/// client asks (the one beside the application): asked every `poll` on a task of its own, its
/// promise kept on a timer of its own. [`Election::held`] says whether the application may act
/// as the holder now, [`Election::token`] is the fencing token to pass to what it writes to,
/// and [`Election::leadership`] waits for a holding and gives a [`Leadership`] whose
/// [`Leadership::lost`] resolves when it ends: at the deadline, whether or not the node
/// answers, or at once when the node says it no longer claims. On a node whose mode promises
/// nothing, [`Election::start`] fails with [`Error::NoPromise`].
pub struct Election {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

/// One holding: its `token`, and [`Leadership::lost`], which resolves when it ends.
pub struct Leadership {
    pub token: Token,
    /// The count of begins and ends when this holding was seen running.
    seen: u64,
    holding: watch::Receiver<(u64, Option<Token>)>,
}

impl Leadership {
    /// Resolves when this holding has ended (the application stops acting as the holder), even
    /// if another began since under the same token.
    pub async fn lost(&mut self) {
        let seen = self.seen;
        let _ = self.holding.wait_for(|(n, _)| *n != seen).await;
    }
}

impl Election {
    /// Stands the node for `name` (with `opts.stand`) and starts asking (a tokio runtime must
    /// run). The node's id is the one its `GET /v1/leader` names: answers of any other node
    /// (a load-balanced address) claim nothing.
    pub async fn start(
        client: Client,
        name: Option<RoleName>,
        opts: ElectionOptions,
    ) -> Result<Election, Error> {
        Self::start_on(client, name, opts, boot_ns).await
    }

    /// [`Election::start`] on another clock (tests).
    pub async fn start_on(
        client: Client,
        name: Option<RoleName>,
        opts: ElectionOptions,
        clock: fn() -> u64,
    ) -> Result<Election, Error> {
        let view = client.leader().await?;
        if let Some(why) = view.no_promise {
            let addr = client.addr().to_string();
            return Err(Error::NoPromise { addr, why });
        }
        let node = view.node_id;
        let promise = Promise {
            margin_ns: opts.margin.as_nanos() as u64,
            ..Promise::default()
        };
        if let (Some(role), true) = (&name, opts.stand) {
            client.stand(role, node, true).await?;
        }
        let shared = Arc::new(Shared {
            client,
            name,
            node,
            opts,
            clock,
            state: Mutex::new((promise, Vec::new())),
            holding: watch::channel((0, None)).0,
            stopped: AtomicBool::new(false),
        });
        let asking = tokio::spawn(asking(shared.clone()));
        let timer = tokio::spawn(timer(shared.clone()));
        Ok(Election {
            shared,
            tasks: vec![asking, timer],
        })
    }

    /// Whether a promise runs now.
    pub fn held(&self) -> bool {
        self.shared.held()
    }

    /// The fencing token of the running holding.
    pub fn token(&self) -> Option<Token> {
        let s = self.shared.state.lock().unwrap();
        s.0.token.filter(|_| s.0.held((self.shared.clock)()))
    }

    /// How long the running promise has left (zero when none runs).
    pub fn time_left(&self) -> Duration {
        self.shared.time_left()
    }

    /// Every holding begun and ended so far, in order.
    pub fn history(&self) -> Vec<Change> {
        self.shared.state.lock().unwrap().1.clone()
    }

    /// Waits until a holding runs.
    pub async fn leadership(&self) -> Leadership {
        let mut holding = self.shared.holding.subscribe();
        let (seen, token) = match holding.wait_for(|(_, h)| h.is_some()).await {
            Ok(v) => (v.0, v.1.unwrap_or(0)),
            Err(_) => (0, 0),
        };
        Leadership {
            token,
            seen,
            holding,
        }
    }

    /// Gives the holding up: ends it here first, then asks the node to resign the role's grant
    /// or, for the cluster's election, to hand over (the admin token). For a role it gives up
    /// the last token heard even when its promise has run out here (the node may still hold
    /// the grant); a grant that has already moved on (409 `stale_token`) is given up already.
    /// No answer with the token resigned begins a holding again, unless the resign fails.
    pub async fn resign(&self) -> Result<(), Error> {
        let s = &self.shared;
        let mut token = None;
        s.step(|p, now| match (&s.name, p.held(now)) {
            (None, false) => p.end(now),
            _ => {
                let (changes, t) = p.resign(now);
                token = t;
                changes
            }
        });
        let Some(token) = token else { return Ok(()) };
        let resigned = match &s.name {
            Some(role) => match s.client.resign_role(role, token).await {
                Err(e) if e.code() == Some("stale_token") => Ok(()),
                r => r.map(drop),
            },
            None => s.client.resign(None).await.map(drop),
        };
        if resigned.is_err() {
            s.state.lock().unwrap().0.unresign(token);
        }
        resigned
    }

    /// Stops asking and ends the holding; withdraws the node from the role and gives the role
    /// up if it holds it (when it stood for it).
    pub async fn stop(self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        for t in &self.tasks {
            t.abort();
        }
        self.shared.step(|p, now| p.end(now));
        let s = &self.shared;
        if let (Some(role), true) = (&s.name, s.opts.stand) {
            let _ = s.client.stand(role, s.node, false).await;
            if let Ok((true, info)) = s.client.role_claim(role).await {
                if let Some(token) = info.token {
                    let _ = s.client.resign_role(role, token).await;
                }
            }
        }
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Shared {
    fn held(&self) -> bool {
        self.state.lock().unwrap().0.held((self.clock)())
    }

    fn time_left(&self) -> Duration {
        let s = self.state.lock().unwrap();
        let now = (self.clock)();
        match s.0.held(now) {
            true => Duration::from_nanos(s.0.deadline_ns - now),
            false => Duration::ZERO,
        }
    }

    /// Steps the promise (expiring it first) and tells the watchers of the holding.
    fn step(&self, f: impl FnOnce(&mut Promise, u64) -> Vec<Change>) {
        let mut s = self.state.lock().unwrap();
        let now = (self.clock)();
        let mut changes = s.0.expire(now);
        changes.extend(f(&mut s.0, now));
        s.1.extend(changes.iter().copied());
        let holding = s.0.token.filter(|_| s.0.held(now));
        drop(s);
        if !changes.is_empty() {
            let n = changes.len() as u64;
            self.holding.send_modify(|v| *v = (v.0 + n, holding));
        }
    }

    /// Asks the node once; the question waits no longer than the running promise has left.
    async fn ask(&self) {
        let left = self.time_left();
        let timeout = match left.is_zero() {
            true => self.opts.timeout,
            false => left.min(self.opts.timeout),
        };
        let client = self.client.clone().timeout(timeout);
        let sent = (self.clock)();
        let answer = match &self.name {
            None => client.claim().await.map(|(c, i)| {
                let lease = i.lease_ms.unwrap_or(0);
                (c && i.node_id == self.node).then_some((i.term, lease))
            }),
            Some(role) => client.role_claim(role).await.map(|(c, i)| {
                let mine = c && i.node == Some(self.node);
                i.token.filter(|_| mine).map(|t| (t, i.lease_ms))
            }),
        };
        // No answer begins a holding once the election has stopped.
        let claim = |c: Option<(Token, u64)>| c.filter(|_| !self.stopped.load(Ordering::SeqCst));
        match answer {
            Ok(c) => self.step(|p, now| p.answered(sent, now, claim(c))),
            // An error answer claims nothing.
            Err(Error::Api { .. }) => self.step(|p, now| p.answered(sent, now, None)),
            // Nothing said: the running promise still runs, to its deadline.
            Err(_) => self.step(|_, _| Vec::new()),
        }
    }
}

async fn asking(shared: Arc<Shared>) {
    loop {
        shared.ask().await;
        tokio::time::sleep(shared.opts.poll).await;
    }
}

/// Wakes at the deadline, or every 50 ms at most: tokio's timers run on `CLOCK_MONOTONIC`,
/// which stands still while the host is suspended, so a deadline that passed in a suspend is
/// enforced within 50 ms of the resume.
async fn timer(shared: Arc<Shared>) {
    loop {
        let left = shared.time_left();
        let wait = match left.is_zero() {
            true => Duration::from_millis(50),
            false => left.min(Duration::from_millis(50)),
        };
        tokio::time::sleep(wait).await;
        shared.step(|_, _| Vec::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_deadline_counts_from_the_send_instant() {
        let mut p = Promise::default();
        let c = p.answered(1_000 * MS, 1_050 * MS, Some((4, 120)));
        assert_eq!(
            c,
            vec![Change {
                elected: true,
                token: 4,
                begun_ns: 1_050 * MS,
                ended_ns: 1_120 * MS
            }]
        );
        assert!(p.held(1_119 * MS) && !p.held(1_120 * MS));
    }

    #[test]
    fn a_new_token_ends_the_old_holding_and_never_extends_it() {
        let mut p = Promise::default();
        p.answered(1_000 * MS, 1_001 * MS, Some((4, 120)));
        let c = p.answered(1_050 * MS, 1_060 * MS, Some((5, 120)));
        assert_eq!(c.len(), 2);
        assert!(!c[0].elected && c[0].ended_ns == 1_060 * MS && c[1].elected);
        assert_eq!((p.token, p.deadline_ns), (Some(5), 1_170 * MS));
    }

    #[test]
    fn a_refusal_ends_the_holding_at_once_and_renewals_only_extend() {
        let mut p = Promise::default();
        p.answered(1_000 * MS, 1_010 * MS, Some((4, 120)));
        p.answered(1_050 * MS, 1_090 * MS, Some((4, 100)));
        p.answered(1_020 * MS, 1_095 * MS, Some((4, 100)));
        assert_eq!(p.deadline_ns, 1_150 * MS);
        let c = p.answered(1_100 * MS, 1_110 * MS, None);
        assert_eq!(c[0].ended_ns, 1_110 * MS);
        assert!(!p.held(1_111 * MS));
        // An answer heard after its own promise ended holds nothing.
        assert!(p
            .answered(1_000 * MS, 1_200 * MS, Some((4, 120)))
            .is_empty());
    }

    /// The fake clock of [`the_election_counts_from_before_the_request_not_its_answer`]: the
    /// fake node moves it 50 ms on while it answers.
    static FAKE_NOW: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000 * MS);

    fn fake_now() -> u64 {
        FAKE_NOW.load(std::sync::atomic::Ordering::SeqCst)
    }

    const QUORUM: &str =
        r#"{"node_id":2,"mode":"quorum","role":"follower","term":3,"leader":null,"lease_ms":null}"#;

    /// A node on a loopback port that answers `GET /v1/leader` with `leader` and `GET
    /// /v1/claim/job` with a claim of token 7 for 120 ms, each claim 50 ms of the fake clock
    /// after it was asked (with `bump`).
    async fn fake_node(leader: &'static str, bump: bool) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            for _ in 0..1000 {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let Ok(n) = conn.read(&mut buf).await else {
                        return;
                    };
                    let req = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let body = if req.starts_with("GET /v1/leader") {
                        leader
                    } else {
                        if bump {
                            FAKE_NOW.fetch_add(50 * MS, std::sync::atomic::Ordering::SeqCst);
                        }
                        r#"{"name":"job","node":2,"token":7,"lease_ms":120}"#
                    };
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                });
            }
        });
        addr
    }

    /// Fails if the deadline were counted from the answer's arrival: the answer takes 50 ms of
    /// the election's clock, and the holding still ends 120 ms after the question was sent.
    #[tokio::test]
    async fn the_election_counts_from_before_the_request_not_its_answer() {
        let addr = fake_node(QUORUM, true).await;
        let client = Client::new(addr, Duration::from_secs(2));
        let opts = ElectionOptions {
            stand: false,
            poll: Duration::from_secs(3600),
            margin: Duration::from_millis(5),
            ..ElectionOptions::default()
        };
        let role = RoleName::new("job").unwrap();
        let sent = fake_now();
        let e = Election::start_on(client, Some(role), opts, fake_now)
            .await
            .unwrap();
        let lead = tokio::time::timeout(Duration::from_secs(5), e.leadership())
            .await
            .expect("a holding within 5 s");
        assert_eq!(lead.token, 7);
        let h = e.history();
        assert_eq!(
            h[0].ended_ns,
            sent + 115 * MS,
            "the deadline counts from the send instant (less the margin)"
        );
        assert_eq!(
            h[0].begun_ns,
            sent + 50 * MS,
            "the holding begins as the answer is heard"
        );
        assert_eq!(e.time_left(), Duration::from_millis(65));
        FAKE_NOW.fetch_add(65 * MS, std::sync::atomic::Ordering::SeqCst);
        assert!(!e.held() && e.token().is_none(), "held past the deadline");
        e.stop().await;
    }

    /// One answer, then no question for an hour: only the election's own timer can end the
    /// holding, at its deadline (real clock), within a bound.
    #[tokio::test]
    async fn the_timer_ends_the_holding_while_nothing_is_asked() {
        let addr = fake_node(QUORUM, false).await;
        let opts = ElectionOptions {
            stand: false,
            poll: Duration::from_secs(3600),
            ..ElectionOptions::default()
        };
        let role = RoleName::new("job").unwrap();
        let client = Client::new(addr, Duration::from_secs(2));
        let e = Election::start(client, Some(role), opts).await.unwrap();
        let mut lead = tokio::time::timeout(Duration::from_secs(5), e.leadership())
            .await
            .expect("a holding within 5 s");
        tokio::time::timeout(Duration::from_secs(2), lead.lost())
            .await
            .expect("the timer ends the holding within 2 s");
        let end = e.history()[1].ended_ns;
        let late = boot_ns().saturating_sub(end);
        assert!(late < 500 * MS, "lost {} ms after the deadline", late / MS);
        e.stop().await;
    }

    #[tokio::test]
    async fn start_refuses_a_mode_that_promises_nothing() {
        let bully = r#"{"node_id":2,"mode":"bully","role":"follower","term":3,"leader":null,"lease_ms":null,"no_promise":"bully mode has no lease"}"#;
        let client = Client::new(fake_node(bully, false).await, Duration::from_secs(2));
        let started = Election::start(client, None, ElectionOptions::default()).await;
        assert!(matches!(started, Err(Error::NoPromise { .. })));
    }

    /// An answer to a question sent before the resign begins no holding of the resigned
    /// token; a later grant does.
    #[test]
    fn no_answer_restarts_a_resigned_token() {
        let mut p = Promise {
            margin_ns: 5 * MS,
            ..Promise::default()
        };
        p.answered(1_000 * MS, 1_001 * MS, Some((4, 120)));
        assert_eq!(p.deadline_ns, 1_115 * MS, "the send + lease - margin");
        let (changes, token) = p.resign(1_010 * MS);
        assert_eq!((changes.len(), token), (1, Some(4)));
        assert!(p
            .answered(1_005 * MS, 1_012 * MS, Some((4, 120)))
            .is_empty());
        assert!(!p.held(1_013 * MS));
        assert_eq!(p.answered(1_020 * MS, 1_021 * MS, Some((9, 120))).len(), 1);
        // The last token heard is given up even after its promise ran out here.
        let mut q = Promise::default();
        q.answered(1_000 * MS, 1_001 * MS, Some((4, 120)));
        assert_eq!(q.resign(2_000 * MS).1, Some(4));
    }

    /// A holding that lapses and begins again under the same token within one step is another
    /// holding: the first one's `lost` resolves (it waited for a change of token before).
    #[tokio::test]
    async fn lost_resolves_when_a_holding_ends_even_if_the_token_comes_back() {
        let shared = Shared {
            client: Client::new("127.0.0.1:9", Duration::from_secs(1)),
            name: None,
            node: 2,
            opts: ElectionOptions::default(),
            clock: fake_now,
            state: Mutex::new((Promise::default(), Vec::new())),
            holding: watch::channel((0, None)).0,
            stopped: AtomicBool::new(false),
        };
        let e = Election {
            shared: Arc::new(shared),
            tasks: Vec::new(),
        };
        let now = fake_now();
        e.shared.step(|p, _| p.answered(now, now, Some((9, 100))));
        let mut lead = e.leadership().await;
        assert_eq!(lead.token, 9);
        // Past the deadline, an answer of the same token: expired, then begun again.
        e.shared.step(|p, _| {
            let mut c = p.expire(now + 200 * MS);
            c.extend(p.answered(now + 150 * MS, now + 200 * MS, Some((9, 100))));
            c
        });
        tokio::time::timeout(Duration::from_secs(1), lead.lost())
            .await
            .expect("lost resolves");
    }
}
