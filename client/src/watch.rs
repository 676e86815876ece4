//! [`Watch`]: a `GET /v1/watch` stream read as views; [`RoleWatch`]: a `GET /v1/roles/watch`
//! stream read as role states and changes. The stream is Server-Sent Events as the
//! WHATWG HTML standard defines them (lines ending in LF, CRLF or CR; a blank line ends an
//! event; `:` starts a comment; `id` and `data` fields, several `data` lines joined by LF);
//! only what electd sends is kept: each event's `id` (the event log's seq), its type (`leader`,
//! or `gap`: events missing from the node's log) and its `data` (the JSON of `/v1/leader`, or
//! of [`Gap`]).

use std::time::Duration;

use crate::error::Error;
use crate::roles::{RoleEvent, RoleInfo};
use crate::wire::{Gap, LeaderInfo};

/// How long a stream may stay silent, keep-alives included, before it counts as dead: three
/// of the node's keep-alive intervals (5 s, `src/watch.rs`).
pub const WATCH_SILENCE: Duration = Duration::from_secs(15);

/// One event of a watch stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watched {
    /// The event log's `seq`; give it back as `last_id` to resume after this event.
    pub id: u64,
    pub info: LeaderInfo,
}

/// An open watch stream.
pub struct Watch {
    sse: Sse,
    last_id: Option<u64>,
}

impl Watch {
    pub(crate) fn new(addr: String, res: reqwest::Response, last_id: Option<u64>) -> Watch {
        Watch {
            sse: Sse::new(addr, res),
            last_id,
        }
    }

    /// The id of the last event read (or the one the stream resumed after).
    pub fn last_id(&self) -> Option<u64> {
        self.last_id
    }

    /// The next event; `Ok(None)` when the node ended the stream (it stopped), an error when
    /// the connection broke or nothing came for [`WATCH_SILENCE`], and [`Error::Gap`] when
    /// the node says that events are missing from its log (the stream goes on after them).
    pub async fn next(&mut self) -> Result<Option<Watched>, Error> {
        let Some((event, id, data)) = self.sse.next_event().await? else {
            return Ok(None);
        };
        if event.as_deref() == Some("gap") {
            let gap: Gap = self.sse.decode(&data)?;
            self.last_id = Some(gap.to);
            return Err(Error::Gap {
                addr: self.sse.addr.clone(),
                gap,
            });
        }
        let info = self.sse.decode(&data)?;
        let id = self.sse.id(id, &data)?;
        self.last_id = Some(id);
        Ok(Some(Watched { id, info }))
    }
}

/// One event of a role watch stream (`GET /v1/roles/watch`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleWatched {
    /// A watched role's state, at the start and after a reset; `id` is the last role event
    /// before it.
    State { id: u64, role: RoleInfo },
    /// A grant, release or revocation the node's log applied.
    Change(RoleEvent),
    /// The resume point asked for is no longer kept on the node: the states follow.
    Reset { id: u64 },
    /// The stream has caught up: the states (or the events a resume asked for) are all sent.
    Synced { id: u64 },
}

/// An open role watch stream.
pub struct RoleWatch {
    sse: Sse,
    last_id: Option<u64>,
}

impl RoleWatch {
    pub(crate) fn new(addr: String, res: reqwest::Response, last_id: Option<u64>) -> RoleWatch {
        RoleWatch {
            sse: Sse::new(addr, res),
            last_id,
        }
    }

    /// The id of the last event read (or the one the stream resumed after): give it back to
    /// resume after it.
    pub fn last_id(&self) -> Option<u64> {
        self.last_id
    }

    /// The next event; `Ok(None)` when the node ended the stream, an error when the connection
    /// broke or nothing came for [`WATCH_SILENCE`].
    pub async fn next(&mut self) -> Result<Option<RoleWatched>, Error> {
        let Some((event, id, data)) = self.sse.next_event().await? else {
            return Ok(None);
        };
        let id = self.sse.id(id, &data)?;
        self.last_id = Some(id);
        Ok(Some(match event.as_deref() {
            Some("role") => RoleWatched::State {
                id,
                role: self.sse.decode(&data)?,
            },
            Some("reset") => RoleWatched::Reset { id },
            Some("synced") => RoleWatched::Synced { id },
            _ => RoleWatched::Change(self.sse.decode(&data)?),
        }))
    }
}

/// An event stream being read: where it comes from, the answer, and its parser.
struct Sse {
    addr: String,
    res: reqwest::Response,
    parser: Parser,
}

impl Sse {
    fn new(addr: String, res: reqwest::Response) -> Sse {
        Sse {
            addr,
            res,
            parser: Parser::default(),
        }
    }

    /// The next event with data (keep-alives skipped): its type, id and data; `Ok(None)` when
    /// the node ended the stream, an error when the connection broke or nothing came for
    /// [`WATCH_SILENCE`].
    async fn next_event(
        &mut self,
    ) -> Result<Option<(Option<String>, Option<String>, String)>, Error> {
        loop {
            while let Some(raw) = self.parser.take_event() {
                if let Some(data) = raw.data {
                    return Ok(Some((raw.event, raw.id, data)));
                }
            }
            let chunk = tokio::time::timeout(WATCH_SILENCE, self.res.chunk())
                .await
                .map_err(|_| Error::Silent {
                    addr: self.addr.clone(),
                    silent: WATCH_SILENCE,
                })?
                .map_err(|source| Error::Http {
                    addr: self.addr.clone(),
                    source,
                    // A stream that broke after it began: no handshake to blame.
                    hint: None,
                })?;
            match chunk {
                Some(bytes) => self.parser.feed(&bytes),
                None => return Ok(None),
            }
        }
    }

    /// An event's numeric id, or a decode error naming its data.
    fn id(&self, id: Option<String>, data: &str) -> Result<u64, Error> {
        id.and_then(|id| id.parse().ok())
            .ok_or_else(|| self.error(format!("an event without a numeric id: {data}")))
    }

    /// An event's data as `T`.
    fn decode<T: serde::de::DeserializeOwned>(&self, data: &str) -> Result<T, Error> {
        serde_json::from_str(data).map_err(|e| self.error(e.to_string()))
    }

    fn error(&self, message: String) -> Error {
        Error::Decode {
            addr: self.addr.clone(),
            status: 200,
            message,
        }
    }
}

/// The fields of one event that electd uses.
#[derive(Debug, Default, PartialEq, Eq)]
struct RawEvent {
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
}

/// Splits a byte stream into events.
#[derive(Default)]
struct Parser {
    /// Bytes of a line not yet ended.
    line: Vec<u8>,
    /// The previous byte was CR (a following LF belongs to the same line end).
    after_cr: bool,
    current: RawEvent,
    ready: std::collections::VecDeque<RawEvent>,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.end_line(&String::from_utf8_lossy(&line));
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
        }
    }

    fn end_line(&mut self, line: &str) {
        if line.is_empty() {
            let ev = std::mem::take(&mut self.current);
            if ev != RawEvent::default() {
                self.ready.push_back(ev);
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => self.current.id = Some(value.to_string()),
            "event" => self.current.event = Some(value.to_string()),
            "data" => match &mut self.current.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.current.data = Some(value.to_string()),
            },
            _ => {} // retry and unknown fields: electd sends none it needs
        }
    }

    fn take_event(&mut self) -> Option<RawEvent> {
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<RawEvent> {
        let mut p = Parser::default();
        for c in chunks {
            p.feed(c);
        }
        std::iter::from_fn(|| p.take_event()).collect()
    }

    fn ev(id: &str, data: &str) -> RawEvent {
        RawEvent {
            id: Some(id.into()),
            event: None,
            data: Some(data.into()),
        }
    }

    #[test]
    fn events_end_at_a_blank_line_whatever_the_line_ends_and_chunks() {
        let want = vec![ev("1", "{\"a\":1}"), ev("2", "x\ny")];
        let lf: &[u8] = b"id: 1\ndata: {\"a\":1}\n\n: keep-alive\n\nid:2\ndata: x\ndata: y\n\n";
        assert_eq!(events(&[lf]), want);
        let crlf = String::from_utf8_lossy(lf).replace('\n', "\r\n");
        assert_eq!(events(&[crlf.as_bytes()]), want);
        // A CRLF split across two chunks is one line end, not two.
        let bytes = crlf.as_bytes();
        let cut = crlf.find('\r').unwrap() + 1;
        assert_eq!(events(&[&bytes[..cut], &bytes[cut..]]), want);
        // One byte at a time.
        let singles: Vec<&[u8]> = lf.chunks(1).collect();
        assert_eq!(events(&singles), want);
    }

    #[test]
    fn comments_alone_make_no_event_and_an_unended_event_waits() {
        assert!(events(&[b": keep-alive\n\n: again\n\n"]).is_empty());
        assert!(events(&[b"id: 3\ndata: {}\n"]).is_empty());
    }
}
