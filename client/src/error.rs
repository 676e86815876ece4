//! [`Error`]: why a request to a node failed.

use std::time::Duration;

use crate::wire::{ErrorBody, Gap};

/// Why a request to a node failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No answer: connection refused, timeout, reset.
    #[error("{addr}: {source}")]
    Http {
        addr: String,
        #[source]
        source: reqwest::Error,
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
}

impl Error {
    /// The error code of an API error (`not_leader`, `unauthorized`, …).
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { body, .. } => Some(&body.error.code),
            _ => None,
        }
    }

    /// The HTTP status, when the node answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } | Error::Decode { status, .. } => Some(*status),
            Error::Http { .. } | Error::Silent { .. } | Error::Gap { .. } => None,
        }
    }
}
