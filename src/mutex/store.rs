//! The store of mutex mode: one row of a PostgreSQL table, which a node takes and renews by
//! one atomic statement, and the client that sends it through the node's fault set.
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS electd_lease (
//!     cluster    text PRIMARY KEY,
//!     holder     bigint NOT NULL,       -- the node that holds the lease
//!     term       bigint NOT NULL,       -- grows with every change of holder: a fencing token
//!     expires_at timestamptz NOT NULL)  -- by the database's clock
//! ```
//!
//! [`CLAIM`] takes the row when its lease has expired or this node already holds it, and
//! answers the row either way: who holds it, in which term, and for how many ms more (by the
//! database's clock). A new holder (or the same one after its lease lapsed) makes a new term.
//!
//! The client connects from the node's own address (so that kernel-level faults can tell
//! nodes apart), creates the table if it is missing, and goes through the node's fault set
//! (`block_to_store`: a statement is lost before the database runs it; `block_from_store`:
//! its answer is lost after it ran; the drop rate and the delay as for peer messages). A
//! statement that does not answer within its deadline drops the connection (a hung one would
//! queue the next statements behind it); the next one connects again.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use secrecy::ExposeSecret;
use tokio::sync::Mutex;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config as PgConfig, NoTls};

use crate::config::Secret;
use crate::counters::Counters;
use crate::faults::{Faults, Verdict};
use crate::role::NodeId;

/// The table, created when missing.
pub const CREATE: &str = "CREATE TABLE IF NOT EXISTS electd_lease (\
     cluster text PRIMARY KEY, holder bigint NOT NULL, term bigint NOT NULL, \
     expires_at timestamptz NOT NULL)";

/// Take the row if its lease expired or this node holds it (`$1` cluster, `$2` this node,
/// `$3` the row's lease in ms); answer the row: holder, term, ms left by the database's clock,
/// and whether this node holds it now.
pub const CLAIM: &str = "WITH attempt AS (\
     INSERT INTO electd_lease AS l (cluster, holder, term, expires_at) \
     VALUES ($1, $2, 1, clock_timestamp() + $3::bigint * interval '1 millisecond') \
     ON CONFLICT (cluster) DO UPDATE SET \
       term = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() \
                   THEN l.term ELSE l.term + 1 END, \
       holder = EXCLUDED.holder, \
       expires_at = EXCLUDED.expires_at \
     WHERE l.holder = EXCLUDED.holder OR l.expires_at <= clock_timestamp() \
     RETURNING holder, term, expires_at) \
   SELECT holder, term, \
     GREATEST(0, EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * 1000)::bigint, true \
     FROM attempt \
   UNION ALL \
   SELECT holder, term, \
     GREATEST(0, EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * 1000)::bigint, false \
     FROM electd_lease WHERE cluster = $1 AND NOT EXISTS (SELECT 1 FROM attempt)";

/// The row as a statement found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub holder: NodeId,
    pub term: u64,
    /// Ms the holder's lease had left when the database ran the statement.
    pub left_ms: u64,
    /// This node holds it (it took or renewed it with this statement).
    pub mine: bool,
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
        })
    }

    /// Where the store is, without credentials: `host:port/dbname`.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Connects (from this node's address), and creates the table when it is missing.
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
        Ok(client)
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

    /// One attempt to take or renew the row for `me` with a lease of `lease_ms` (by the
    /// database's clock), all within `deadline`. A lost or late answer is `Unreachable`, after
    /// which the connection is dropped.
    pub async fn claim(
        &self,
        me: NodeId,
        lease_ms: u64,
        deadline: Duration,
    ) -> Result<Row, StoreError> {
        let attempt = async {
            self.counters.sent("claim");
            let verdict = self.faults.on_send_store();
            match verdict {
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
                .query(CLAIM, &[&self.cluster, &(me as i64), &(lease_ms as i64)])
                .await
                .map_err(|e| self.classify(e))?;
            drop(slot);
            if self.faults.on_receive_store() == Verdict::Drop {
                return std::future::pending().await;
            }
            let row = rows
                .first()
                .ok_or_else(|| StoreError::Failed(self.shown.clone(), "no row".into()))?;
            let get = |i: usize| -> Result<i64, StoreError> {
                row.try_get::<_, i64>(i)
                    .map_err(|e| StoreError::Failed(self.shown.clone(), e.to_string()))
            };
            Ok(Row {
                holder: get(0)? as NodeId,
                term: get(1)? as u64,
                left_ms: get(2)? as u64,
                mine: row
                    .try_get::<_, bool>(3)
                    .map_err(|e| StoreError::Failed(self.shown.clone(), e.to_string()))?,
            })
        };
        match tokio::time::timeout(deadline, attempt).await {
            Ok(Ok(row)) => Ok(row),
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
