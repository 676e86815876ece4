//! etcd's election recipe, as a client of etcd's JSON gateway: the peer of the roles benchmark
//! (`roles_bench.rs`).
//!
//! The recipe is the one etcd's Go client runs (`concurrency.Election.Campaign`, which
//! `etcdctl elect` uses): a candidate holds a lease, kept alive at a third of its TTL as the Go
//! client does; to campaign for a name it puts `NAME/LEASE` under that lease unless the key
//! exists (its creation revision is its place in line), and it has won once no key of that
//! name was created before its own. Where the Go client watches its predecessor's key, a
//! candidate here watches the deletions under all roles on one stream and reads again a name it
//! waits for when a key of that name goes: the same reads, over one connection rather than one
//! per name.
//!
//! Why not etcd's server-side campaign (`/v3/election/campaign`), which would need no recipe:
//! on etcd 3.4.23 here, a member holding a few hundred waiting campaigns stopped answering them
//! (365 of 800 returned after the holder's lease expired; after that, none of 100 on the same
//! member), so a benchmark at 1,000 roles cannot run on it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::task::JoinSet;

/// Requests a candidate keeps in flight while it campaigns for many names.
const IN_FLIGHT: usize = 16;

pub fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn unb64(s: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    String::from_utf8(bytes).ok()
}

/// A 64-bit number of etcd's JSON (a string; a zero is left out).
fn num(v: &Value) -> i64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// What a candidate's tasks share.
struct Shared {
    http: reqwest::Client,
    /// The member's client URL.
    url: String,
    lease: i64,
    /// Names campaigned for and not won yet: the creation revision of this candidate's key.
    waiting: Mutex<BTreeMap<String, i64>>,
    claimed: AtomicU64,
}

impl Shared {
    async fn call(&self, path: &str, body: &Value) -> Result<Value, String> {
        let req = self.http.post(format!("{}{path}", self.url)).json(body);
        let answer = req.send().await.map_err(|e| format!("{path}: {e}"))?;
        let answer = answer
            .error_for_status()
            .map_err(|e| format!("{path}: {e}"))?;
        answer.json().await.map_err(|e| format!("{path}: {e}"))
    }

    /// Campaigns for `name`: this candidate's key in line, then [`Shared::check`].
    async fn campaign(&self, name: &str) -> Result<(), String> {
        let key = format!("{name}/{:x}", self.lease);
        let txn = json!({
            "compare": [{
                "key": b64(&key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"
            }],
            "success": [{"request_put": {
                "key": b64(&key), "value": b64("candidate"), "lease": self.lease.to_string()
            }}],
            "failure": [{"request_range": {"key": b64(&key)}}],
        });
        let r = self.call("/v3/kv/txn", &txn).await?;
        let rev = match r["succeeded"].as_bool() {
            Some(true) => num(&r["header"]["revision"]),
            _ => num(&r["responses"][0]["response_range"]["kvs"][0]["create_revision"]),
        };
        // Waiting before it reads: a deletion from here on is seen by the watch.
        self.waiting
            .lock()
            .expect("waiting")
            .insert(name.to_string(), rev);
        self.check(name).await
    }

    /// Whether a key of `name` created before this candidate's is left; none: won (counted
    /// once, by whichever read saw it first).
    async fn check(&self, name: &str) -> Result<(), String> {
        let Some(rev) = self.waiting.lock().expect("waiting").get(name).copied() else {
            return Ok(());
        };
        let before = json!({
            "key": b64(&format!("{name}/")), "range_end": b64(&format!("{name}0")),
            "max_create_revision": (rev - 1).to_string(), "sort_order": "DESCEND",
            "sort_target": "CREATE", "limit": "1", "keys_only": true
        });
        let r = self.call("/v3/kv/range", &before).await?;
        let none = r["kvs"].as_array().is_none_or(|k| k.is_empty());
        if none && self.waiting.lock().expect("waiting").remove(name).is_some() {
            self.claimed.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Watches the deletions of keys in `[prefix, end)`, and checks each name waited for whose
    /// key went; `created` once the watch is in place.
    async fn watch(&self, prefix: &str, end: &str, created: tokio::sync::oneshot::Sender<()>) {
        let body = json!({"create_request": {
            "key": b64(prefix), "range_end": b64(end), "filters": ["NOPUT"]
        }});
        let req = self.http.post(format!("{}/v3/watch", self.url)).json(&body);
        let Ok(mut stream) = req.send().await else {
            return;
        };
        let (mut buf, mut created) = (Vec::new(), Some(created));
        while let Ok(Some(chunk)) = stream.chunk().await {
            buf.extend_from_slice(&chunk);
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=nl).collect();
                let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                if v["result"]["created"].as_bool() == Some(true) {
                    created.take().map(|c| c.send(()));
                }
                let gone: BTreeSet<String> = (v["result"]["events"].as_array().into_iter())
                    .flatten()
                    .filter_map(|e| unb64(e["kv"]["key"].as_str()?))
                    .filter_map(|k| Some(k.rsplit_once('/')?.0.to_string()))
                    .collect();
                let checks =
                    (futures_util::stream::iter(gone)).map(|n| async move { self.check(&n).await });
                let _: Vec<_> = checks.buffer_unordered(IN_FLIGHT).collect().await;
            }
        }
    }
}

/// One candidate: a lease, its keepalives, its watch and its campaigns, all stopped (the
/// client gone) when it is dropped.
pub struct Candidate {
    shared: Arc<Shared>,
    tasks: JoinSet<()>,
    campaigns: u64,
}

impl Candidate {
    /// A candidate on the member at `url`: a lease of etcd's shortest TTL (1 s asked; etcd
    /// answers what it grants), kept alive, and its watch of `[prefix, end)` in place.
    pub async fn join(
        http: reqwest::Client,
        url: String,
        prefix: &str,
        end: &str,
    ) -> Result<Candidate, String> {
        let mut shared = Shared {
            http,
            url,
            lease: 0,
            waiting: Mutex::default(),
            claimed: AtomicU64::new(0),
        };
        let grant = shared.call("/v3/lease/grant", &json!({"TTL": 1})).await?;
        shared.lease = num(&grant["ID"]);
        let ttl_s = num(&grant["TTL"]).max(1) as u64;
        let shared = Arc::new(shared);
        let mut tasks = JoinSet::new();
        let s = shared.clone();
        tasks.spawn(async move {
            let (every, id) = (Duration::from_millis(ttl_s * 1000 / 3), s.lease.to_string());
            loop {
                let _ = s.call("/v3/lease/keepalive", &json!({"ID": id})).await;
                tokio::time::sleep(every).await;
            }
        });
        let (s, (tx, rx)) = (shared.clone(), tokio::sync::oneshot::channel());
        let (prefix, end) = (prefix.to_string(), end.to_string());
        tasks.spawn(async move { s.watch(&prefix, &end, tx).await });
        rx.await.map_err(|_| "etcd: the watch did not start")?;
        Ok(Candidate {
            shared,
            tasks,
            campaigns: 0,
        })
    }

    /// Campaigns for `names`, [`IN_FLIGHT`] at a time, in the background.
    pub fn campaign(&mut self, names: Vec<String>) {
        self.campaigns += names.len() as u64;
        let s = self.shared.clone();
        self.tasks.spawn(async move {
            let asks = (futures_util::stream::iter(names)).map(|n| {
                let s = s.clone();
                async move { s.campaign(&n).await }
            });
            let mut asks = asks.buffer_unordered(IN_FLIGHT);
            while let Some(r) = asks.next().await {
                if let Err(e) = r {
                    eprintln!("etcd campaign: {e}");
                }
            }
        });
    }

    /// Names it has won.
    pub fn claimed(&self) -> u64 {
        self.shared.claimed.load(Ordering::Relaxed)
    }

    /// Names it campaigned for.
    pub fn campaigns(&self) -> u64 {
        self.campaigns
    }
}
