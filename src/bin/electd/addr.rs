//! `--node ADDR`: where the node a command talks to is, and how (`--cacert` for a node that
//! serves TLS), one set of flags for every command.

use std::path::PathBuf;
use std::time::Duration;

use electd_client::Client;

/// `--node ADDR` (or `ELECTD_NODE`): the node a command talks to.
#[derive(clap::Args, Debug, Clone)]
pub struct NodeAddr {
    /// The node to ask, IP:PORT (or HOST:PORT).
    #[arg(
        id = "node",
        long = "node",
        value_name = "ADDR",
        env = "ELECTD_NODE",
        default_value = "127.0.0.1:7001",
        global = true
    )]
    pub addr: String,
    /// The cluster CA (PEM) that signed the node's certificate: talk to the node over TLS,
    /// trusting that CA only.
    #[arg(long, value_name = "FILE", env = "ELECTD_CACERT", global = true)]
    pub cacert: Option<PathBuf>,
    /// A client certificate and its key in one PEM file, for a node whose admin API asks for
    /// one (`tls.admin_client_cert`); needs --cacert.
    #[arg(
        long,
        value_name = "FILE",
        env = "ELECTD_CLIENT_CERT",
        global = true,
        requires = "cacert"
    )]
    pub client_cert: Option<PathBuf>,
}

impl NodeAddr {
    /// A client of the node whose every request ends after `timeout`. A TLS file that cannot
    /// be read is a bad flag: the command says which and exits 2.
    pub fn client(&self, timeout: Duration) -> Client {
        self.client_at(self.addr.clone(), timeout)
    }

    /// The same for the node at `addr` (one the first named).
    pub fn client_at(&self, addr: String, timeout: Duration) -> Client {
        let Some(ca) = &self.cacert else {
            return Client::new(addr, timeout);
        };
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read(path).unwrap_or_else(|e| {
                eprintln!("electd: {flag} {}: {e}", path.display());
                std::process::exit(2)
            })
        };
        let ca = read("--cacert", ca);
        let identity = self.client_cert.as_ref().map(|p| read("--client-cert", p));
        Client::new_tls(addr, timeout, &ca, identity.as_deref()).unwrap_or_else(|e| {
            eprintln!("electd: --cacert/--client-cert: {e}");
            std::process::exit(2)
        })
    }
}
