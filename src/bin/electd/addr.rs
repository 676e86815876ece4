//! `--node ADDR` and `--endpoints A,B,C`: where the nodes a command talks to are, and how
//! (`--cacert` for nodes that serve TLS), one set of flags for every command. With several
//! endpoints a question goes to each in order until one answers ([`Nodes::ask`]), and an admin
//! request goes to the leader they name ([`Nodes::leader`]).

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use electd_client::{Client, Error};

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

/// `--node`, or `--endpoints` (or `ELECTD_ENDPOINTS`): the commands that ask a node (all but
/// `run`, which runs under the claim of one node, its own).
#[derive(clap::Args, Debug, Clone)]
pub struct Nodes {
    #[command(flatten)]
    pub at: NodeAddr,
    /// Several nodes instead of --node, HOST:PORT,HOST:PORT,...: a question goes to each in
    /// order until one answers (one that refuses the connection or does not answer within
    /// --timeout-ms is skipped); an admin request goes to the leader they name.
    #[arg(
        long,
        value_name = "HOST:PORT,...",
        env = "ELECTD_ENDPOINTS",
        value_delimiter = ',',
        value_parser = parse_endpoint,
        global = true
    )]
    pub endpoints: Vec<String>,
}

/// One entry of `--endpoints`: HOST:PORT (an IPv6 address in brackets, `[::1]:7001`), spaces
/// around it left out.
pub fn parse_endpoint(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("an empty endpoint (a comma too many?): give HOST:PORT,HOST:PORT".into());
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} is not HOST:PORT: no port"));
    };
    if host.is_empty() {
        return Err(format!("{s:?} is not HOST:PORT: no host"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!(
            "{s:?} is not HOST:PORT: an IPv6 address goes in brackets, [::1]:7001"
        ));
    }
    if host.contains(|c: char| c.is_whitespace() || c == '/' || c == '@') {
        return Err(format!("{s:?} is not HOST:PORT"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(s.to_string()),
        _ => Err(format!(
            "{s:?} is not HOST:PORT: the port {port:?} is not a number from 1 to 65535"
        )),
    }
}

/// Where `--node` and `--endpoints` came from, in `matches` (the whole command line parsed):
/// the most explicit source at any level of subcommands.
fn sources(matches: &clap::ArgMatches) -> (Option<ValueSource>, Option<ValueSource>) {
    let (mut node, mut endpoints) = (None, None);
    let mut at = Some(matches);
    while let Some(m) = at {
        // Asked only where defined (an id a level does not define is a bug to clap).
        let source = |id: &str| m.try_get_raw(id).ok().and_then(|_| m.value_source(id));
        node = node.max(source("node"));
        endpoints = endpoints.max(source("endpoints"));
        at = m.subcommand().map(|(_, sub)| sub);
    }
    (node, endpoints)
}

/// Why the nodes gave no answer to print.
#[derive(Debug)]
pub enum Failed {
    /// A node answered with an error (an error status): that is the answer.
    Answer(Error),
    /// No node answered: each one tried, in order, and why.
    Unanswered(Vec<Error>),
    /// An admin request with `--endpoints`: the nodes that answered named no leader (what
    /// each endpoint said, in order).
    NoLeader(Vec<String>),
    /// An admin request with `--endpoints` and without TLS: the leader's address is not one of
    /// the endpoints, so the admin token is not sent to it (an answer over plain HTTP could
    /// have been forged to name any address).
    NotAnEndpoint { leader: String, named_by: String },
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Answer(e) => write!(f, "{e}"),
            Failed::Unanswered(tried) if tried.len() == 1 => write!(f, "{}", tried[0]),
            Failed::Unanswered(tried) => {
                write!(f, "none of the {} endpoints answered:", tried.len())?;
                tried.iter().try_for_each(|e| write!(f, "\n  {e}"))
            }
            Failed::NoLeader(said) => {
                write!(f, "no leader to send the request to:")?;
                said.iter().try_for_each(|s| write!(f, "\n  {s}"))
            }
            Failed::NotAnEndpoint { leader, named_by } => write!(
                f,
                "{named_by} names the leader {leader}, which is not one of --endpoints: \
                 without TLS the admin token goes only to an address given (add {leader} to \
                 --endpoints, or use --cacert)"
            ),
        }
    }
}

impl Nodes {
    /// Decides between `--node` and `--endpoints` by where each came from (`matches`: the
    /// command line parsed): a flag wins over a variable; both flags, or both variables, are
    /// a usage error.
    pub fn settle(&mut self, matches: &clap::ArgMatches) -> Result<(), String> {
        use ValueSource::{CommandLine, EnvVariable};
        match sources(matches) {
            (Some(CommandLine), Some(CommandLine)) => Err(
                "--node and --endpoints cannot be used together: --node asks one node, \
                 --endpoints tries several in order; give one of them"
                    .into(),
            ),
            (Some(EnvVariable), Some(EnvVariable)) => Err(
                "ELECTD_NODE and ELECTD_ENDPOINTS are both set: unset one (or give --node or \
                 --endpoints, which wins over both variables)"
                    .into(),
            ),
            // --node wins over ELECTD_ENDPOINTS.
            (Some(CommandLine), _) => {
                self.endpoints.clear();
                Ok(())
            }
            // Otherwise the endpoints, when given, win over ELECTD_NODE or --node's default.
            _ => Ok(()),
        }
    }

    /// The nodes to ask, in order: the endpoints, or the one node.
    pub fn addrs(&self) -> Vec<String> {
        if self.endpoints.is_empty() {
            vec![self.at.addr.clone()]
        } else {
            self.endpoints.clone()
        }
    }

    /// Asks the nodes at `order`, one at a time, with `ask` (given a client of each, bounded by
    /// `timeout`) until one answers: its address and its answer. A node that does not answer
    /// (connection refused or reset, nothing within `timeout`) is skipped; an error answer (an
    /// error status, or a body that is not the contract's) is the answer.
    pub async fn ask<T, F, Fut>(
        &self,
        order: &[String],
        timeout: Duration,
        mut ask: F,
    ) -> Result<(String, T), Failed>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut tried = Vec::new();
        for addr in order {
            match ask(self.at.client_at(addr.clone(), timeout)).await {
                Ok(answer) => return Ok((addr.clone(), answer)),
                Err(e) if e.status().is_some() => return Err(Failed::Answer(e)),
                Err(e) => tried.push(e),
            }
        }
        Err(Failed::Unanswered(tried))
    }

    /// A client for an admin request: with `--node`, of that node (which refuses when it is
    /// not the leader); with `--endpoints`, of the leader that the first of them to know one
    /// names (asked `GET /v1/leader` in order). Without TLS (`--cacert`) the leader's address
    /// must be one of the endpoints: the admin token goes to no other.
    pub async fn leader(&self, timeout: Duration) -> Result<Client, Failed> {
        if self.endpoints.is_empty() {
            return Ok(self.at.client(timeout));
        }
        let mut said = Vec::new();
        let mut unanswered = Vec::new();
        for addr in &self.endpoints {
            match self.at.client_at(addr.clone(), timeout).leader().await {
                Ok(info) => match info.leader {
                    Some(l) if self.at.cacert.is_none() && !self.endpoints.contains(&l.addr) => {
                        return Err(Failed::NotAnEndpoint {
                            leader: l.addr,
                            named_by: addr.clone(),
                        })
                    }
                    Some(l) => return Ok(self.at.client_at(l.addr, timeout)),
                    None => said.push(format!(
                        "{addr}: node {} ({}, term {}) knows no leader",
                        info.node_id,
                        info.role.as_str(),
                        info.term
                    )),
                },
                Err(e) if e.status().is_some() => said.push(e.to_string()),
                Err(e) => {
                    said.push(e.to_string());
                    unanswered.push(e);
                }
            }
        }
        if unanswered.len() == said.len() {
            Err(Failed::Unanswered(unanswered))
        } else {
            Err(Failed::NoLeader(said))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_host_and_port() {
        for ok in [
            "127.0.0.1:7001",
            "node-1.example:7001",
            "[::1]:7001",
            " a:1 ",
        ] {
            assert_eq!(parse_endpoint(ok).as_deref(), Ok(ok.trim()), "{ok}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("127.0.0.1", "no port"),
            (":7001", "no host"),
            ("a:0", "1 to 65535"),
            ("a:70000", "1 to 65535"),
            ("a:x", "1 to 65535"),
            ("::1:7001", "brackets"),
            ("http://a:1", "not HOST:PORT"),
        ] {
            let err = parse_endpoint(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    fn settled(args: &[&str]) -> Result<Vec<String>, String> {
        use clap::{Args, FromArgMatches};
        // The process's own ELECTD_NODE and ELECTD_ENDPOINTS left out (tests/cli.rs tries
        // the variables).
        let cmd = Nodes::augment_args(clap::Command::new("t").no_binary_name(true))
            .mut_args(|a| a.env(None::<&'static str>));
        let m = cmd.try_get_matches_from(args).map_err(|e| e.to_string())?;
        let mut nodes = Nodes::from_arg_matches(&m).map_err(|e| e.to_string())?;
        nodes.settle(&m)?;
        Ok(nodes.addrs())
    }

    /// Which of --node and --endpoints is used: the endpoints over the default; both flags are
    /// refused.
    #[test]
    fn node_or_endpoints() {
        assert_eq!(settled(&[]).unwrap(), ["127.0.0.1:7001"]);
        assert_eq!(settled(&["--node", "a:1"]).unwrap(), ["a:1"]);
        assert_eq!(
            settled(&["--endpoints", "a:1, b:2", "--endpoints", "c:3"]).unwrap(),
            ["a:1", "b:2", "c:3"]
        );
        let err = settled(&["--node", "a:1", "--endpoints", "b:2"]).unwrap_err();
        assert!(err.contains("cannot be used together"), "{err}");
        let err = settled(&["--endpoints", "a:1,,b:2"]).unwrap_err();
        assert!(err.contains("empty endpoint"), "{err}");
    }
}
