//! `--join`: a node that joins a running quorum cluster asks its leader to add it (with the
//! admin token; without one, an operator runs `electd member add`).

use std::time::Duration;

use electd::config::{Config, ExposeSecret};
use electd_client::{Client, Error};

/// How often, and how many times at most (ten minutes), the node asks.
const EVERY: Duration = Duration::from_secs(1);
const TRIES: u32 = 600;

/// Asks the leader, found through `cfg.join`, to add this node, until it is a voter.
pub async fn ask_to_be_added(cfg: &Config) {
    let Some(join) = cfg.join.clone() else {
        return;
    };
    let me = cfg.peer_addr(cfg.id).unwrap_or_default().to_string();
    let Some(token) = cfg
        .admin_token
        .as_ref()
        .map(|t| t.expose_secret().to_string())
    else {
        tracing::info!(
            "joining through {join}: no admin token, so an operator adds this node: \
             electd member add {} {me} --node LEADER (electd leader --node {join} names it)",
            cfg.id
        );
        return;
    };
    for attempt in 0..TRIES {
        let leader = match client_of(cfg, join.clone(), Duration::from_secs(2))
            .leader()
            .await
        {
            Ok(info) => info.leader.map(|l| l.addr),
            Err(_) => None,
        };
        if let Some(leader) = leader {
            let client = client_of(cfg, leader.clone(), Duration::from_secs(6))
                .admin_token(Some(token.clone()));
            match client.add_member(cfg.id, &me).await {
                Ok(_) => {
                    tracing::info!(leader, "joined the cluster: a voter now");
                    return;
                }
                Err(e) if e.code() == Some("already_member") => {
                    tracing::info!("already a voter of the cluster");
                    return;
                }
                Err(e @ Error::Api { .. }) if attempt % 10 == 0 => {
                    tracing::warn!(error = %e, "the leader did not add this node yet; asking again")
                }
                Err(_) => {}
            }
        }
        tokio::time::sleep(EVERY).await;
    }
    tracing::error!("not added to the cluster after {TRIES} attempts through {join}: giving up");
}

/// A client of the member at `addr`: over TLS when the node runs it, trusting the cluster CA
/// and presenting the node's own certificate (an admin API may ask for one).
fn client_of(cfg: &Config, addr: String, timeout: Duration) -> Client {
    let Some(tls) = &cfg.tls else {
        return Client::new(addr, timeout);
    };
    let read = |p: &std::path::Path| std::fs::read(p).unwrap_or_default();
    let mut identity = read(&tls.cert);
    identity.extend_from_slice(&read(&tls.key));
    match Client::new_tls(addr.clone(), timeout, &read(&tls.ca), Some(&identity)) {
        Ok(client) => client,
        Err(e) => {
            // The node read these files at start: one changed since. The request fails.
            tracing::warn!("joining: the TLS files do not make a client: {e}");
            Client::new(addr, timeout)
        }
    }
}
