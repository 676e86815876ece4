//! [`Error`]: why a request to a node failed.

use std::time::Duration;

use crate::wire::{ErrorBody, Gap};

/// Why a request to a node failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No answer: connection refused, timeout, reset, a TLS handshake that failed. Said with
    /// every cause (reqwest's own line names only the URL), and a hint when the causes point
    /// at TLS spoken to a plain node or the other way round.
    #[error("{addr}: {}{}", causes(source), hint.map(|h| format!(" ({h})")).unwrap_or_default())]
    Http {
        addr: String,
        #[source]
        source: reqwest::Error,
        hint: Option<&'static str>,
    },
    /// The node answered with an error status and the contract's error body.
    #[error("{addr}: {status} {}: {}", body.error.code, body.error.message)]
    Api {
        addr: String,
        status: u16,
        body: ErrorBody,
    },
    /// The node answered something that is not the contract's JSON.
    #[error("{addr}: unexpected answer ({status}): {message}")]
    Decode {
        addr: String,
        status: u16,
        message: String,
    },
    /// No answer in time, or a watch stream that fell silent (not even a keep-alive).
    #[error("{addr}: nothing heard for {silent:?}")]
    Silent { addr: String, silent: Duration },
    /// A watch stream said that events are missing from the node's log ([`Gap`]). The stream
    /// goes on after them: call `next` again.
    #[error("{addr}: {}", gap.message)]
    Gap { addr: String, gap: Gap },
    /// The node's mode promises nothing (bully, ring, invitation: `no_promise`): an
    /// [`Election`](crate::Election) could never keep a holding there.
    #[error("{addr}: this cluster's mode makes no promise: {why}")]
    NoPromise { addr: String, why: String },
}

impl Error {
    /// The error code of an API error (`not_leader`, `unauthorized`, …).
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { body, .. } => Some(&body.error.code),
            _ => None,
        }
    }

    /// [`Error::Http`] for a request to `addr` over TLS (`tls`) or plain HTTP.
    pub(crate) fn http(addr: &str, source: reqwest::Error, tls: bool) -> Error {
        let said = causes(&source).to_lowercase();
        let hint =
            if tls && (said.contains("invalidcontenttype") || said.contains("corrupt message")) {
                Some("the node does not seem to serve TLS: leave out --cacert")
            } else if tls && said.contains("certificate") {
                Some("is --cacert the CA that signed the node's certificate?")
            } else if !tls
                && (said.contains("connection closed")
                    || said.contains("reset")
                    || said.contains("invalid http version"))
            {
                Some("if the node serves TLS, pass --cacert with its CA")
            } else {
                None
            };
        Error::Http {
            addr: addr.to_string(),
            source,
            hint,
        }
    }

    /// The HTTP status, when the node answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } | Error::Decode { status, .. } => Some(*status),
            Error::Http { .. }
            | Error::Silent { .. }
            | Error::Gap { .. }
            | Error::NoPromise { .. } => None,
        }
    }
}

/// `e` and each of its causes, joined by ": " (a cause that repeats the one before it once).
/// The node's peer transport says why a peer was unreachable the same way.
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut last = out.clone();
    let mut cause = e.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !last.contains(&said) {
            out.push_str(": ");
            out.push_str(&said);
        }
        last = said;
        cause = c.source();
    }
    out
}
