//! The rules a config must keep before anything starts, in five parts (identity, limits,
//! peers, secrets, timing), each naming the field it checks. The timing rules are the margins the
//! safety argument states (docs/safety.md): the claim lease is at least [`LEASE_BEATS`]
//! beats and ends at least [`Timing::min_margin_ms`] before the follower lease.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use secrecy::ExposeSecret;

use super::{
    invalid, is_host_port, Config, ConfigError, MAX_CONNECTIONS_RANGE, MAX_WATCHERS_LIMIT,
};
use crate::role::Mode;

/// This node's id, the cluster's id, the data dir, and the cluster it joins.
pub(super) fn identity(c: &Config) -> Result<(), ConfigError> {
    if c.id == 0 {
        return Err(invalid("id", "must be a positive integer"));
    }
    if c.cluster_id.is_empty()
        || c.cluster_id.len() > 64
        || !c
            .cluster_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(invalid(
            "cluster_id",
            format!(
                "{:?} must be 1 to 64 characters of letters, digits, '-', '_' or '.'",
                c.cluster_id
            ),
        ));
    }
    if c.data_dir.as_os_str().is_empty() {
        return Err(invalid("data_dir", "must not be empty"));
    }
    if let Some(join) = &c.join {
        if c.mode != Mode::Quorum {
            return Err(invalid(
                "join",
                format!("{} mode keeps the members of its config", c.mode.as_str()),
            ));
        }
        if !is_host_port(join) {
            return Err(invalid("join", format!("{join:?} must be HOST:PORT")));
        }
    }
    if c.nonvoter && c.join.is_none() {
        return Err(invalid(
            "nonvoter",
            "needs join: a non-voter joins a running cluster (it never bootstraps one)",
        ));
    }
    Ok(())
}

/// The node's limits: watchers, connections, and how long a preferred member waits to settle.
pub(super) fn limits(c: &Config) -> Result<(), ConfigError> {
    if !(1..=MAX_WATCHERS_LIMIT).contains(&c.max_watchers) {
        return Err(invalid(
            "max_watchers",
            format!(
                "({}) must be between 1 and {MAX_WATCHERS_LIMIT}",
                c.max_watchers
            ),
        ));
    }
    if !(1..=MAX_WATCHERS_LIMIT).contains(&c.max_watchers_per_client) {
        return Err(invalid(
            "max_watchers_per_client",
            format!(
                "({}) must be between 1 and {MAX_WATCHERS_LIMIT}",
                c.max_watchers_per_client
            ),
        ));
    }
    if !MAX_CONNECTIONS_RANGE.contains(&c.max_connections) {
        return Err(invalid(
            "max_connections",
            format!(
                "({}) must be between {} and {}",
                c.max_connections,
                MAX_CONNECTIONS_RANGE.start(),
                MAX_CONNECTIONS_RANGE.end()
            ),
        ));
    }
    let remove_min = (4 * c.timing.follower_lease_ms).max(1_000);
    let remove_after = c.effective_remove_after_ms();
    if !(remove_min..=86_400_000).contains(&remove_after) {
        return Err(invalid(
            "nonvoters.remove_after_ms",
            format!(
                "({remove_after}) must be from four follower leases and 1000 ({remove_min}) \
                 to one day (86400000): shorter, a non-voter paused for a moment would be \
                 removed and join again"
            ),
        ));
    }
    let settle_min = 2 * c.timing.follower_lease_ms;
    if let Some(settle) = c.priority_settle_ms {
        if !(settle_min..=3_600_000).contains(&settle) {
            return Err(invalid(
                "priority_settle_ms",
                format!(
                    "({settle}) must be from two follower leases ({settle_min}) to one \
                     hour (3600000): shorter, a flapping member could take the role back \
                     and forth"
                ),
            ));
        }
    }
    Ok(())
}

/// The members: ids and addresses unique and well formed, this node among them.
pub(super) fn peers(c: &Config) -> Result<(), ConfigError> {
    if c.peers.is_empty() {
        return Err(invalid(
            "peers",
            "must list every member of the cluster, this node included",
        ));
    }
    let mut ids = BTreeSet::new();
    let mut addrs = BTreeSet::new();
    for (i, p) in c.peers.iter().enumerate() {
        if p.id == 0 {
            return Err(invalid(
                format!("peers[{i}].id"),
                "must be a positive integer",
            ));
        }
        if !ids.insert(p.id) {
            return Err(invalid(
                format!("peers[{i}].id"),
                format!("{} appears more than once", p.id),
            ));
        }
        if !is_host_port(&p.addr) {
            return Err(invalid(
                format!("peers[{i}].addr"),
                format!(
                    "{:?} is not an address: IP:PORT or HOST:PORT (a DNS name)",
                    p.addr
                ),
            ));
        }
        if p.id == c.id && c.listen.is_none() && p.addr.parse::<SocketAddr>().is_err() {
            return Err(invalid(
                "listen",
                format!(
                    "must be given when this node's own address ({}) is a host name: \
                     the IP:PORT to bind, e.g. 0.0.0.0:{}",
                    p.addr,
                    p.addr.rsplit(':').next().unwrap_or("7000")
                ),
            ));
        }
        if !addrs.insert(p.addr.as_str()) {
            return Err(invalid(
                format!("peers[{i}].addr"),
                format!("{} appears more than once", p.addr),
            ));
        }
    }
    if !ids.contains(&c.id) {
        return Err(invalid(
            "id",
            format!("{} is not among the peers' ids {:?}", c.id, ids),
        ));
    }
    Ok(())
}

/// The cluster secret (required among peers unless `insecure`), the admin token, and the
/// store of mutex mode.
pub(super) fn secrets(c: &Config) -> Result<(), ConfigError> {
    match (&c.store_url, c.mode) {
        (None, Mode::Mutex) => {
            return Err(invalid(
                "store_url",
                "mutex mode needs one: postgres://USER:PASSWORD@HOST:PORT/DB \
                 (ELECTD_STORE_URL)",
            ))
        }
        (Some(url), _) => {
            check_store_url(url.expose_secret()).map_err(|message| invalid("store_url", message))?
        }
        (None, _) => {}
    }
    if let Some(secret) = &c.cluster_secret {
        if secret.expose_secret().len() < 16 {
            return Err(invalid("cluster_secret", "must be at least 16 characters"));
        }
    }
    if let Some(also) = &c.cluster_secret_accepted {
        if also.expose_secret().len() < 16 {
            return Err(invalid(
                "cluster_secret_accepted",
                "must be at least 16 characters",
            ));
        }
        if c.cluster_secret.is_none() {
            return Err(invalid(
                "cluster_secret_accepted",
                "is a second secret taken besides cluster_secret while it changes: set \
                 cluster_secret too",
            ));
        }
    }
    if c.runs_insecure() && !c.insecure {
        return Err(invalid(
            "cluster_secret",
            format!(
                "a cluster of {} members needs one (its peers authenticate every request \
                 with it) unless it runs [tls]: set cluster_secret (ELECTD_CLUSTER_SECRET), \
                 or insecure = true (--insecure) to let any process that reaches a node vote",
                c.peers.len()
            ),
        ));
    }
    if let Some(token) = &c.admin_token {
        if token.expose_secret().len() < 16 {
            return Err(invalid("admin_token", "must be at least 16 characters"));
        }
    }
    Ok(())
}

/// The timing rules of the safety argument (docs/safety.md, "Timings: the margins"):
/// - `follower_lease_ms` between [`MIN_FOLLOWER_LEASE_MS`] and [`MAX_FOLLOWER_LEASE_MS`];
/// - the claim lease at least [`LEASE_BEATS`] beats, so that a claim renewed every beat
///   does not lapse between two probes (and `/v1/claim` does not flap) when one probe is
///   lost or slow;
/// - the claim lease below the follower lease by at least [`Timing::min_margin_ms`]: a
///   tenth of the follower lease, and never less than [`MIN_MARGIN_MS`]. The margin is what
///   clock-rate differences between hosts may eat before a claim could outlast the lease
///   of the followers that acknowledged it.
///
/// Every timing accepted here is accepted by openraft too (test:
/// `every_accepted_timing_is_accepted_by_openraft` in `quorum/types.rs`).
pub(super) fn timing(c: &Config) -> Result<(), ConfigError> {
    let t = &c.timing;
    let f = t.follower_lease_ms;
    if t.heartbeat_ms == 0 {
        return Err(invalid("timing.heartbeat_ms", "(0) must be positive"));
    }
    if !(MIN_FOLLOWER_LEASE_MS..=MAX_FOLLOWER_LEASE_MS).contains(&f) {
        return Err(invalid(
            "timing.follower_lease_ms",
            format!("({f}) must be between {MIN_FOLLOWER_LEASE_MS} and {MAX_FOLLOWER_LEASE_MS}"),
        ));
    }
    let lease = t.effective_lease_ms();
    let lease_name = if t.lease_ms == 0 {
        format!("the default claim lease, timing.follower_lease_ms less a fifth ({lease})")
    } else {
        format!("timing.lease_ms ({lease})")
    };
    if LEASE_BEATS * t.heartbeat_ms > lease {
        return Err(invalid(
            "timing.heartbeat_ms",
            format!(
                "({}) must be at most 1/{LEASE_BEATS} of {lease_name}, or the claim lapses \
                 between two probes",
                t.heartbeat_ms
            ),
        ));
    }
    // Named after the field the user wrote: the default lease follows the follower lease.
    let field = if t.lease_ms == 0 {
        "timing.follower_lease_ms"
    } else {
        "timing.lease_ms"
    };
    let what = if t.lease_ms == 0 {
        format!("({f}) gives a default claim lease of {lease} ms, which")
    } else {
        format!("({lease})")
    };
    let margin = t.min_margin_ms();
    if lease + margin > f {
        return Err(invalid(
            field,
            format!(
                "{what} must stay at least {margin} ms below timing.follower_lease_ms ({f}): \
                 at most {} (the margin is a tenth of the follower lease, at least \
                 {MIN_MARGIN_MS} ms)",
                f - margin
            ),
        ));
    }
    Ok(())
}

/// Checks a `store_url` without connecting: a PostgreSQL URL with a TCP host and a database.
fn check_store_url(url: &str) -> Result<(), String> {
    let pg: tokio_postgres::Config = url.parse().map_err(|e| {
        format!("not a PostgreSQL URL (postgres://USER:PASSWORD@HOST:PORT/DB): {e}")
    })?;
    if !matches!(
        pg.get_hosts().first(),
        Some(tokio_postgres::config::Host::Tcp(_))
    ) {
        return Err("needs a TCP host, as in postgres://USER@HOST:PORT/DB".into());
    }
    if pg.get_dbname().is_none_or(str::is_empty) {
        return Err("names no database, as in postgres://USER@HOST:PORT/DB".into());
    }
    if !matches!(
        pg.get_ssl_mode(),
        tokio_postgres::config::SslMode::Disable | tokio_postgres::config::SslMode::Prefer
    ) {
        // Accepted, it could never connect: the store client speaks plain TCP.
        return Err(
            "sets sslmode=require, but electd connects to PostgreSQL without TLS: use \
                    sslmode=disable (or leave it out), and keep the store on a network you \
                    trust or behind a TLS tunnel (docs/modes.md, mutex)"
                .into(),
        );
    }
    Ok(())
}

/// The shortest follower lease accepted, ms.
pub const MIN_FOLLOWER_LEASE_MS: u64 = 10;
/// The longest follower lease accepted, ms (ten minutes).
pub const MAX_FOLLOWER_LEASE_MS: u64 = 600_000;
/// The claim lease must be at least this many beats.
pub const LEASE_BEATS: u64 = 3;
/// The smallest margin between the claim lease and the follower lease, ms.
pub const MIN_MARGIN_MS: u64 = 2;
