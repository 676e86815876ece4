//! `--join`: a node that joins a running quorum cluster asks its leader to add it (with the
//! admin token; without one, an operator runs `electd member add`). A non-voter (`--nonvoter`)
//! asks by itself over the peer channel (src/quorum/driver/nonvoters.rs).

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
    if cfg.nonvoter {
        tracing::info!(
            "joining through {join} as a member that does not vote: the node asks the leader \
             itself, with the cluster's credential (no admin token)"
        );
        return;
    }
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
        if let Some(leader) = leader_of(cfg, &join).await {
            if ask_leader(cfg, &leader, &token, &me, attempt).await {
                return;
            }
        }
        tokio::time::sleep(EVERY).await;
    }
    tracing::error!("not added to the cluster after {TRIES} attempts through {join}: giving up");
}

/// The leader's address, as the node at `join` names it; `None` when it names none or does not
/// answer.
async fn leader_of(cfg: &Config, join: &str) -> Option<String> {
    let client = client_of(cfg, join.to_string(), Duration::from_secs(2))?;
    Some(client.leader().await.ok()?.leader?.addr)
}

/// Asks the leader at `leader` once (the `attempt`th time) to add this node, at `me`, with the
/// admin `token`: whether it is a voter now.
async fn ask_leader(cfg: &Config, leader: &str, token: &str, me: &str, attempt: u32) -> bool {
    let Some(client) = client_of(cfg, leader.to_string(), Duration::from_secs(6)) else {
        return false;
    };
    // Without TLS the answer that named the leader was not authenticated: the token
    // goes only to an address the config names (a member, or the join address).
    if cfg.tls.is_none() && !names(cfg, leader) {
        if attempt % 10 == 0 {
            tracing::warn!(
                leader,
                "joining: the leader's address is neither the join address nor a \
                 member's in the config; the admin token is not sent to it (add it to \
                 peers, or use TLS)"
            );
        }
        return false;
    }
    let client = client.admin_token(Some(token.to_string()));
    match client.add_member(cfg.id, me).await {
        Ok(_) => {
            tracing::info!(leader, "joined the cluster: a voter now");
            true
        }
        Err(e) if e.code() == Some("already_member") => {
            tracing::info!("already a voter of the cluster");
            true
        }
        Err(e @ Error::Api { .. }) if attempt % 10 == 0 => {
            tracing::warn!(error = %e, "the leader did not add this node yet; asking again");
            false
        }
        Err(_) => false,
    }
}

/// Whether `addr` is the join address or a member's address in the config.
fn names(cfg: &Config, addr: &str) -> bool {
    cfg.join.as_deref() == Some(addr) || cfg.peers.iter().any(|p| p.addr == addr)
}

/// A client of the member at `addr`: over TLS when the node runs it, trusting the cluster CA
/// and presenting the node's own certificate (an admin API may ask for one). `None` when the
/// TLS files no longer make one (the node read them at start: one changed since, a certificate
/// mid-rotation): never plain HTTP instead, which would send the admin token in clear.
fn client_of(cfg: &Config, addr: String, timeout: Duration) -> Option<Client> {
    let Some(tls) = &cfg.tls else {
        return Some(Client::new(addr, timeout));
    };
    let read = |p: &std::path::Path| std::fs::read(p).unwrap_or_default();
    let mut identity = read(&tls.cert);
    identity.extend_from_slice(&read(&tls.key));
    match Client::new_tls(addr, timeout, &read(&tls.ca), Some(&identity)) {
        Ok(client) => Some(client),
        Err(e) => {
            tracing::warn!("joining: the TLS files do not make a client, asking later: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let text = format!(
            "id = 4\ncluster_id = \"c\"\ndata_dir = \"/tmp/x\"\njoin = \"127.0.0.1:7001\"\n{extra}\n\
             [[peers]]\nid = 1\naddr = \"127.0.0.1:7001\"\n\
             [[peers]]\nid = 2\naddr = \"127.0.0.1:7002\"\n\
             [[peers]]\nid = 4\naddr = \"127.0.0.1:7004\"\n"
        );
        Config::from_toml(&text, std::path::Path::new("test.toml")).unwrap()
    }

    /// Without TLS the token goes only to an address the config names: an unauthenticated
    /// `/v1/leader` answer cannot send it elsewhere (issue 30).
    #[test]
    fn the_token_goes_only_to_addresses_the_config_names() {
        let cfg = config("");
        assert!(names(&cfg, "127.0.0.1:7001"), "the join address");
        assert!(names(&cfg, "127.0.0.1:7002"), "a member's");
        assert!(
            !names(&cfg, "10.6.6.6:7001"),
            "an address a forged answer named"
        );
    }

    /// TLS files that no longer make a client (a certificate mid-rotation) give no client:
    /// never plain HTTP with the token in clear (it fell back to plain HTTP before).
    #[test]
    fn unreadable_tls_files_give_no_client_not_plain_http() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        for n in ["ca.pem", "cert.pem", "key.pem"] {
            std::fs::write(dir.path().join(n), "not a pem").unwrap();
        }
        let cfg = config(&format!(
            "[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"",
            p("ca.pem"),
            p("cert.pem"),
            p("key.pem")
        ));
        assert!(cfg.tls.is_some());
        assert!(client_of(&cfg, "127.0.0.1:7001".into(), Duration::from_secs(1)).is_none());
    }
}
