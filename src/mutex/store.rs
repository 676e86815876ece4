//! The store of mutex mode: one row of a PostgreSQL table, which a node takes, renews and
//! releases by atomic statements, and the client that sends them through the node's fault set.
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS electd_lease_v2 (
//!     cluster  text PRIMARY KEY,
//!     holder   bigint NOT NULL,  -- the node that holds the row; 0: nobody
//!     instance bigint NOT NULL,  -- the holder's process, drawn at its start
//!     term     bigint NOT NULL,  -- grows with every change of holder: a fencing token
//!     version  bigint NOT NULL,  -- grows with every write
//!     wait_ms  bigint NOT NULL); -- how long a contender must see this version unchanged
//! CREATE SEQUENCE IF NOT EXISTS electd_term;  -- terms, never reused even if the row goes
//! ```
//!
//! The database's clock is never read. Like a Kubernetes Lease, the row is taken on the
//! contenders' own clocks: a contender takes it only once it has seen one `version` unchanged
//! for that version's `wait_ms` (counted from when the answer that showed it arrived), by a
//! compare-and-set on that version ([`CLAIM`]); the holder renews by writing a new version, so
//! every contender starts counting again. A row that is missing (deleted, or a database
//! restored from a backup) is created held by nobody, with a term above every term the creating
//! node has seen and above the sequence, and it too must be seen unchanged for a whole lease
//! before anyone takes it. The argument is in `node.rs`.
//!
//! The client connects from the node's own address (so that kernel-level faults can tell
//! nodes apart), creates the table and the sequence if they are missing, makes every commit of
//! its session durable before it is answered (`synchronous_commit`, [`Store::connect`]), and
//! goes through the node's fault set (`block_to_store`: a statement is lost before the
//! database runs it; `block_from_store`: its answer is lost after it ran; the drop rate and the
//! delay as for peer messages). A statement that does not answer within its deadline drops the
//! connection (a hung one would queue the next statements behind it); the next one connects
//! again.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use secrecy::ExposeSecret;
use tokio::sync::Mutex;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config as PgConfig, NoTls};

use crate::config::{Secret, MAX_FOLLOWER_LEASE_MS};
use crate::counters::Counters;
use crate::faults::{Faults, Verdict};
use crate::role::NodeId;

/// The table and the sequence of terms, created when missing. (`electd_lease`, the table of
/// electd before 0.2, which judged expiry by the database's clock, is no longer used.)
pub const CREATE: &str = "CREATE TABLE IF NOT EXISTS electd_lease_v2 (\
     cluster text PRIMARY KEY, holder bigint NOT NULL, instance bigint NOT NULL, \
     term bigint NOT NULL, version bigint NOT NULL, wait_ms bigint NOT NULL); \
     CREATE SEQUENCE IF NOT EXISTS electd_term";

/// One statement a beat. `$1` cluster, `$2` this node, `$3` its instance, `$4` and `$8` the
/// version and term this node may take (it saw them unchanged for the version's wait; -1:
/// none; the term too, since a row created again starts its versions again), `$5` the wait to write (the
/// follower lease, ms), `$6` the highest term this node has seen, `$7` whether it renews the
/// row should it hold it. It creates the row held by nobody when there is none, renews it when
/// this node (this instance) holds it and `$7`, takes it when it is still at `$4`, `$8`; and
/// answers the row either way: holder, instance, term, version, wait, and whether this
/// statement made this node the holder. A read-committed UPDATE re-checks its condition on the
/// row it locked, so two contenders racing for one version cannot both take it.
///
/// The row's values are input (an operator's `UPDATE`, a restore from elsewhere): no value makes
/// the statement overflow (a term or version past [`TERM_MAX`] is not counted on from, a take
/// writes a term from the sequence and `$6` instead, a version starts again at 1), and a
/// renewal keeps the row's term only while it is not behind `$6`, the highest term this node
/// has seen: a row restored with an older term naming this process is renewed into a new term,
/// never back. (A version that starts again cannot be mistaken for one seen before: the
/// versions of one term only grow, and a take always writes a new term.)
pub const CLAIM: &str = "WITH fresh AS (\
     INSERT INTO electd_lease_v2 (cluster, holder, instance, term, version, wait_ms) \
     SELECT $1, 0, 0, GREATEST(nextval('electd_term'), $6::bigint + 1), 1, $5::bigint \
     WHERE NOT EXISTS (SELECT 1 FROM electd_lease_v2 WHERE cluster = $1) \
     ON CONFLICT (cluster) DO NOTHING \
     RETURNING holder, instance, term, version, wait_ms), \
   attempt AS (\
     UPDATE electd_lease_v2 AS l SET \
       term = CASE WHEN l.holder = $2 AND l.instance = $3 AND l.term >= $6::bigint \
                        AND l.term BETWEEN 1 AND 9007199254740991 THEN l.term \
                   ELSE GREATEST(CASE WHEN l.term BETWEEN 0 AND 9007199254740990 \
                                      THEN l.term + 1 ELSE 0 END, \
                                 $6::bigint + 1, nextval('electd_term')) END, \
       holder = $2, instance = $3, \
       version = CASE WHEN l.version BETWEEN 0 AND 9007199254740990 \
                      THEN l.version + 1 ELSE 1 END, \
       wait_ms = $5::bigint \
     WHERE l.cluster = $1 \
       AND (($7::bool AND l.holder = $2 AND l.instance = $3) \
            OR (l.version = $4::bigint AND l.term = $8::bigint)) \
     RETURNING holder, instance, term, version, wait_ms) \
   SELECT holder, instance, term, version, wait_ms, true FROM attempt \
   UNION ALL \
   SELECT holder, instance, term, version, wait_ms, false FROM fresh \
   UNION ALL \
   SELECT holder, instance, term, version, wait_ms, false FROM electd_lease_v2 \
     WHERE cluster = $1 AND NOT EXISTS (SELECT 1 FROM attempt) \
       AND NOT EXISTS (SELECT 1 FROM fresh)";

/// Gives the row up (`$1` cluster, `$2` this node, `$3` its instance, `$4` the wait to write:
/// how long the promises this node gave may still run, with the margin): held by nobody, a new
/// version, the term kept; nothing when another holds it. Answers the rows it changed.
pub const RELEASE: &str = "UPDATE electd_lease_v2 \
     SET holder = 0, instance = 0, version = version + 1, wait_ms = $4::bigint \
     WHERE cluster = $1 AND holder = $2 AND instance = $3 RETURNING 1";

/// The highest term a row may carry: 2^53 − 1, the largest integer every JSON client reads
/// exactly. No cluster counts that far (a change of holder every millisecond for 285,000
/// years): a term above it, or below 1, was written by hand or restored from elsewhere. Such a
/// row is reported ([`BadRow`]), never claimed in, never counted on from (nothing this node
/// remembers or writes takes it as the highest term seen), and taken into a term of the
/// sequence's instead ([`CLAIM`]). No claim was ever made in it, so no fencing token goes back.
pub const TERM_MAX: u64 = (1 << 53) - 1;

/// The row as a statement found it, its values checked ([`Row::checked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// 0: nobody (a new row, or released).
    pub holder: NodeId,
    pub instance: i64,
    /// The row's term, 0 when it is out of range (`bad`).
    pub term: u64,
    /// The term as stored, for the compare-and-set of a take only.
    pub stored_term: i64,
    pub version: i64,
    /// How long a contender must see this version unchanged before it may take the row (at
    /// most [`MAX_FOLLOWER_LEASE_MS`]: a value out of range counts as that).
    pub wait_ms: u64,
    /// This node holds it (it took or renewed it with this statement).
    pub mine: bool,
    /// The first value out of range, if any.
    pub bad: Option<BadRow>,
}

/// A value of the row out of the range any node writes: what an operator or a restore put there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadRow {
    /// Not a node id (below 0).
    #[error("holder {0} is not a node id: the row counts as held by nobody")]
    Holder(i64),
    /// Below 1 or above [`TERM_MAX`].
    #[error(
        "term {0} is out of range (1..=2^53-1): no claim in it, and the next holder writes a \
         term of the sequence's"
    )]
    Term(i64),
    /// Below 0 or above [`MAX_FOLLOWER_LEASE_MS`], the longest wait any node writes.
    #[error(
        "wait_ms {0} is out of range (0..={MAX_FOLLOWER_LEASE_MS}): a contender waits \
         {MAX_FOLLOWER_LEASE_MS} ms, the longest any holder's promises can run"
    )]
    WaitMs(i64),
    /// Below 1 or above [`TERM_MAX`].
    #[error("version {0} is out of range (1..=2^53-1): the next write starts again at 1")]
    Version(i64),
}

impl BadRow {
    /// The `field` label of `electd_store_bad_rows_total`.
    pub fn field(self) -> &'static str {
        match self {
            BadRow::Holder(_) => "holder",
            BadRow::Term(_) => "term",
            BadRow::WaitMs(_) => "wait_ms",
            BadRow::Version(_) => "version",
        }
    }
}

impl Row {
    /// The row from the values stored (`holder, instance, term, version, wait_ms`), each checked
    /// against the range a node writes: a value out of range is replaced by what is safe (a
    /// holder of nobody, a term of 0 that nobody claims in, the longest wait) and the first such
    /// value named in `bad`. Nothing here can overflow or panic, whatever the row holds.
    pub fn checked(stored: [i64; 5], mine: bool) -> Row {
        let [holder, instance, term, version, wait_ms] = stored;
        let in_terms = |v: i64| (1..=TERM_MAX as i64).contains(&v);
        let waits = 0..=MAX_FOLLOWER_LEASE_MS as i64;
        let bad = [
            (holder < 0).then_some(BadRow::Holder(holder)),
            (!in_terms(term)).then_some(BadRow::Term(term)),
            (!waits.contains(&wait_ms)).then_some(BadRow::WaitMs(wait_ms)),
            (!in_terms(version)).then_some(BadRow::Version(version)),
        ]
        .into_iter()
        .flatten()
        .next();
        Row {
            holder: u64::try_from(holder).unwrap_or(0),
            instance,
            term: if in_terms(term) { term as u64 } else { 0 },
            stored_term: term,
            version,
            wait_ms: if waits.contains(&wait_ms) {
                wait_ms as u64
            } else {
                MAX_FOLLOWER_LEASE_MS
            },
            mine,
            bad,
        }
    }
}

/// What the statement of one beat asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ask {
    pub me: NodeId,
    pub instance: i64,
    /// The version and term (as stored) this node may take, if any.
    pub take: Option<(i64, i64)>,
    pub wait_ms: u64,
    pub max_term: u64,
    /// Renew the row if this instance holds it.
    pub renew: bool,
}

/// Why a statement got no answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store was not reached, or did not answer within the deadline (or a fault lost it).
    #[error("store {0}: no answer: {1}")]
    Unreachable(String, String),
    /// The store refused this node: a wrong password or user, a missing database. Checked at
    /// start: the node does not start with it.
    #[error("store_url: {0}")]
    Refused(String),
    /// The store answered with an error.
    #[error("store {0}: {1}")]
    Failed(String, String),
}

/// The client of one node.
pub struct Store {
    pg: PgConfig,
    /// Where the store is, for messages (no credentials).
    shown: String,
    cluster: String,
    /// Outgoing connections are made from this address.
    bind: Option<IpAddr>,
    client: Mutex<Option<Client>>,
    faults: Arc<Faults>,
    counters: Arc<Counters>,
    /// The last session found the server running with `fsync = off` (warned once).
    fsync_off: AtomicBool,
    /// `synchronous_commit` as the last session keeps it (after asking for `on`).
    synchronous_commit: std::sync::Mutex<Option<String>>,
}

impl Store {
    /// A client of the store at `url` (checked by the config's validation) for `cluster`.
    pub fn new(
        url: &Secret,
        cluster: &str,
        bind: Option<IpAddr>,
        faults: Arc<Faults>,
        counters: Arc<Counters>,
    ) -> Result<Store, StoreError> {
        let pg: PgConfig = url
            .expose_secret()
            .parse()
            .map_err(|e| StoreError::Refused(format!("not a PostgreSQL URL: {e}")))?;
        let shown = shown(&pg);
        Ok(Store {
            pg,
            shown,
            cluster: cluster.to_string(),
            bind,
            client: Mutex::new(None),
            faults,
            counters,
            fsync_off: AtomicBool::new(false),
            synchronous_commit: std::sync::Mutex::new(None),
        })
    }

    /// Where the store is, without credentials: `host:port/dbname`.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// `synchronous_commit` as the last session keeps it, once one connected.
    pub fn synchronous_commit(&self) -> Option<String> {
        self.synchronous_commit.lock().expect("setting").clone()
    }

    /// Whether the server said it runs with `fsync = off` (a committed renewal survives a
    /// killed server, not a crashed host).
    pub fn fsync_off(&self) -> bool {
        self.fsync_off.load(Relaxed)
    }

    /// Connects (from this node's address), creates the table when it is missing, and makes
    /// the session's commits durable before they are answered.
    async fn connect(&self) -> Result<Client, StoreError> {
        let unreachable = |e: String| StoreError::Unreachable(self.shown.clone(), e);
        let (host, port) = match (self.pg.get_hosts().first(), self.pg.get_ports().first()) {
            (Some(tokio_postgres::config::Host::Tcp(h)), port) => {
                (h.clone(), *port.unwrap_or(&5432))
            }
            _ => return Err(StoreError::Refused("needs a TCP host (host:port)".into())),
        };
        let addr: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .next()
            .ok_or_else(|| unreachable(format!("{host} has no address")))?;
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
        }
        .map_err(|e| unreachable(e.to_string()))?;
        if let Some(ip) = self.bind.filter(|ip| !ip.is_unspecified()) {
            socket
                .bind(SocketAddr::new(ip, 0))
                .map_err(|e| unreachable(format!("bind {ip}: {e}")))?;
        }
        let stream = socket
            .connect(addr)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (client, connection) = self
            .pg
            .connect_raw(stream, NoTls)
            .await
            .map_err(|e| self.classify(e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "store connection ended");
            }
        });
        match client.batch_execute(CREATE).await {
            Ok(()) => {}
            // Two nodes creating the table at once: one of them loses the race, and the
            // table is there all the same.
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {}
            Err(e) => return Err(self.classify(e)),
        }
        self.make_durable(&client).await?;
        Ok(client)
    }

    /// A renewal the database answered must survive the server's crash, or the row could
    /// expire early and its term be handed out twice: with `synchronous_commit = off` (or
    /// `local` while synchronous standbys are named) the server answers before the commit is
    /// on disk (or on a standby). So the session asks for `on`, and no statement runs on a
    /// session that does not keep it. `fsync = off` is the server's own choice, made for the
    /// whole server: warned about (once), shown in `/v1/status`, not refused.
    async fn make_durable(&self, client: &Client) -> Result<(), StoreError> {
        let show = |name: &'static str| async move {
            client
                .query_one(&format!("SHOW {name}"), &[])
                .await
                .and_then(|r| r.try_get::<_, String>(0))
                .map_err(|e| self.classify(e))
        };
        if matches!(show("synchronous_commit").await?.as_str(), "off" | "local") {
            client
                .batch_execute("SET synchronous_commit TO on")
                .await
                .map_err(|e| self.classify(e))?;
        }
        let now = show("synchronous_commit").await?;
        *self.synchronous_commit.lock().expect("setting") = Some(now.clone());
        if matches!(now.as_str(), "off" | "local") {
            return Err(StoreError::Failed(
                self.shown.clone(),
                format!(
                    "the session keeps synchronous_commit = {now}: an answered renewal could \
                     be lost, and a term handed out twice; no claim on this server"
                ),
            ));
        }
        let fsync_off = show("fsync").await? == "off";
        if fsync_off && !self.fsync_off.swap(true, Relaxed) {
            tracing::warn!(
                store = %self.shown,
                "the store runs with fsync = off: a renewal it answered survives a killed \
                 server but not a crashed host (then a term can be handed out twice)"
            );
        }
        self.fsync_off.store(fsync_off, Relaxed);
        Ok(())
    }

    /// A refusal that no retry mends (credentials, database) or a passing failure.
    fn classify(&self, e: tokio_postgres::Error) -> StoreError {
        let refused = [
            SqlState::INVALID_PASSWORD,
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            SqlState::INVALID_CATALOG_NAME,
        ];
        match e.code() {
            Some(code) if refused.contains(code) => StoreError::Refused(format!(
                "{} refused this node: {}",
                self.shown,
                e.as_db_error()
                    .map_or(e.to_string(), |d| d.message().to_string())
            )),
            Some(_) => StoreError::Failed(
                self.shown.clone(),
                e.as_db_error()
                    .map_or(e.to_string(), |d| d.message().to_string()),
            ),
            None => StoreError::Unreachable(self.shown.clone(), e.to_string()),
        }
    }

    /// Checks at start that the store lets this node in: `Err(Refused)` when it refuses it
    /// (the node does not start); an unreachable store is only logged (the node starts, and
    /// claims nothing until the store answers).
    pub async fn check(&self, deadline: Duration) -> Result<(), StoreError> {
        match tokio::time::timeout(deadline, self.connect()).await {
            Ok(Ok(client)) => {
                *self.client.lock().await = Some(client);
                Ok(())
            }
            Ok(Err(e @ StoreError::Refused(_))) => Err(e),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "store not reached at start: no claim until it is");
                Ok(())
            }
            Err(_) => {
                tracing::warn!(store = %self.shown, "store not reached at start: no claim until it is");
                Ok(())
            }
        }
    }

    /// One beat's statement ([`CLAIM`]), all within `deadline`. A lost or late answer is
    /// `Unreachable`, after which the connection is dropped.
    pub async fn claim(&self, ask: Ask, deadline: Duration) -> Result<Row, StoreError> {
        let (version, term) = ask.take.unwrap_or((-1, -1));
        let params: [&(dyn ToSql + Sync); 8] = [
            &self.cluster,
            &(ask.me as i64),
            &ask.instance,
            &version,
            &(ask.wait_ms as i64),
            &(ask.max_term as i64),
            &ask.renew,
            &term,
        ];
        let rows = self.run("claim", CLAIM, &params, deadline).await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Failed(self.shown.clone(), "no row".into()))?;
        let failed =
            |e: tokio_postgres::Error| StoreError::Failed(self.shown.clone(), e.to_string());
        let int = |i: usize| row.try_get::<_, i64>(i).map_err(failed);
        Ok(Row::checked(
            [int(0)?, int(1)?, int(2)?, int(3)?, int(4)?],
            row.try_get::<_, bool>(5).map_err(failed)?,
        ))
    }

    /// Gives the row up if this instance holds it ([`RELEASE`]); `wait_ms`: how long the
    /// promises already given may run, with the margin. True when it held it.
    pub async fn release(
        &self,
        me: NodeId,
        instance: i64,
        wait_ms: u64,
        deadline: Duration,
    ) -> Result<bool, StoreError> {
        let params: [&(dyn ToSql + Sync); 4] =
            [&self.cluster, &(me as i64), &instance, &(wait_ms as i64)];
        let rows = self.run("release", RELEASE, &params, deadline).await?;
        Ok(!rows.is_empty())
    }

    /// Sends `sql` through the fault set on the session (connecting when there is none), all
    /// within `deadline`; drops the session when it fails or is late.
    async fn run(
        &self,
        what: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        deadline: Duration,
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let attempt = async {
            self.counters.sent(what);
            match self.faults.on_send_store() {
                Verdict::Drop => return std::future::pending().await,
                Verdict::Deliver(d) if !d.is_zero() => tokio::time::sleep(d).await,
                Verdict::Deliver(_) => {}
            }
            let mut slot = self.client.lock().await;
            if slot.as_ref().is_none_or(Client::is_closed) {
                *slot = Some(self.connect().await?);
            }
            let client = slot.as_ref().expect("connected");
            let rows = client
                .query(sql, params)
                .await
                .map_err(|e| self.classify(e))?;
            drop(slot);
            if self.faults.on_receive_store() == Verdict::Drop {
                return std::future::pending().await;
            }
            Ok(rows)
        };
        match tokio::time::timeout(deadline, attempt).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => {
                self.reset().await;
                Err(e)
            }
            Err(_) => {
                self.reset().await;
                Err(StoreError::Unreachable(
                    self.shown.clone(),
                    format!("no answer within {deadline:?}"),
                ))
            }
        }
    }

    /// Drops the connection: the next statement connects again.
    async fn reset(&self) {
        *self.client.lock().await = None;
    }
}

/// `host:port/dbname` of a PostgreSQL config, without credentials.
fn shown(pg: &PgConfig) -> String {
    let host = match pg.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "?".into(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}/{}", pg.get_dbname().unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOP: i64 = TERM_MAX as i64;

    #[test]
    fn the_statement_bounds_terms_and_versions_by_term_max() {
        assert_eq!(TOP, 9_007_199_254_740_991);
        assert!(CLAIM.contains(&format!("BETWEEN 1 AND {TOP}")));
        assert!(CLAIM.contains(&format!("BETWEEN 0 AND {}", TOP - 1)));
    }

    #[test]
    fn a_row_in_range_is_taken_as_it_is() {
        let r = Row::checked([3, 77, 12, 40, 150], true);
        assert_eq!(
            r,
            Row {
                holder: 3,
                instance: 77,
                term: 12,
                stored_term: 12,
                version: 40,
                wait_ms: 150,
                mine: true,
                bad: None,
            }
        );
        let edge = Row::checked([0, 0, TOP, TOP, MAX_FOLLOWER_LEASE_MS as i64], false);
        assert_eq!(edge.bad, None);
        assert_eq!(edge.term, TERM_MAX);
    }

    /// Issue 48, item 2: values an operator or a restore can write. None panics or overflows;
    /// each is named, and replaced by what is safe.
    #[test]
    fn a_value_out_of_range_is_named_and_made_safe() {
        let huge_term = Row::checked([2, 1, i64::MAX - 1, 5, 150], false);
        assert_eq!(huge_term.bad, Some(BadRow::Term(i64::MAX - 1)));
        assert_eq!(huge_term.term, 0, "never claimed in nor counted on from");
        assert_eq!(
            huge_term.stored_term,
            i64::MAX - 1,
            "still taken by its value"
        );
        for term in [0, -5, TOP + 1, i64::MIN] {
            assert_eq!(Row::checked([2, 1, term, 5, 150], false).term, 0);
        }
        for wait in [-1, i64::MAX, MAX_FOLLOWER_LEASE_MS as i64 + 1] {
            let r = Row::checked([0, 0, 9, 5, wait], false);
            assert_eq!(r.bad, Some(BadRow::WaitMs(wait)));
            assert_eq!(
                r.wait_ms, MAX_FOLLOWER_LEASE_MS,
                "the longest wait, not none"
            );
        }
        let r = Row::checked([-3, 0, 9, 5, 150], false);
        assert_eq!((r.holder, r.bad), (0, Some(BadRow::Holder(-3))));
        let r = Row::checked([1, 1, 9, i64::MAX, 150], false);
        assert_eq!(r.bad, Some(BadRow::Version(i64::MAX)));
        assert!(BadRow::Term(-1).to_string().contains("out of range"));
        assert_eq!(BadRow::WaitMs(-1).field(), "wait_ms");
    }
}
