//! The status page (`GET /`) in headless Chromium on a real 5-node cluster: the page names the
//! leader the cluster agrees on and who holds a named role; the leader is killed; the page shows
//! it unreachable, names the new leader, and the role held by the same node as before. Screenshots before and after go to `target/tmp/status-page-*.png`.
//!
//! Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: fd 3 in,
//! fd 4 out, messages ended by NUL), so the test opens no port of its own. Without Chromium
//! (`scripts/test.sh` installs it as root) the test is skipped, and recorded as such
//! ([`electd_lab::skip`]).

mod common;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::TestCluster;
use electd_client::Mode;
use electd_client::NodeId;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| {
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join(name))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .find(|p| p.is_file())
}

/// A headless Chromium on a DevTools pipe, killed (and its profile removed) when dropped.
struct Chrome {
    child: Child,
    to: File,
    from: mpsc::Receiver<Value>,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Chrome {
    fn launch(bin: &PathBuf) -> Result<Chrome, String> {
        let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
        let flags = rustix::pipe::PipeFlags::CLOEXEC;
        let (cmd_read, cmd_write) = rustix::pipe::pipe_with(flags).map_err(|e| e.to_string())?;
        let (out_read, out_write) = rustix::pipe::pipe_with(flags).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(bin);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-pipe",
            "--window-size=1100,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        // Chromium's singleton socket goes to a directory of its own under TMPDIR, which a
        // killed browser leaves behind (one /tmp/org.chromium.Chromium.* a run): inside the
        // profile, it goes with it.
        .env("TMPDIR", profile.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: runs in the child between fork and exec; dup2 is one system call (rustix, no
        // libc state), and the OwnedFds made for fds 3 and 4 are forgotten, never closed here.
        unsafe {
            cmd.pre_exec(move || {
                let mut three = OwnedFd::from_raw_fd(3);
                let mut four = OwnedFd::from_raw_fd(4);
                rustix::io::dup2(&cmd_read, &mut three)?;
                rustix::io::dup2(&out_write, &mut four)?;
                std::mem::forget(three);
                std::mem::forget(four);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        drop(cmd);
        let (tx, rx) = mpsc::channel();
        let mut reader = BufReader::new(File::from(out_read));
        std::thread::spawn(move || loop {
            let mut msg = Vec::new();
            match reader.read_until(0, &mut msg) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    msg.pop();
                    if let Ok(v) = serde_json::from_slice::<Value>(&msg) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Chrome {
            child,
            to: File::from(cmd_write),
            from: rx,
            next_id: 1,
            _profile: profile,
        })
    }

    /// One DevTools command (to the page's session, when given); its result.
    fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = s.into();
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to
            .write_all(&bytes)
            .map_err(|e| format!("{method}: {e}"))?;
        let until = Instant::now() + WAIT;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let v = self
                .from
                .recv_timeout(left)
                .map_err(|_| format!("{method}: no answer from Chromium within {WAIT:?}"))?;
            if v["id"] == id {
                if let Some(e) = v.get("error") {
                    return Err(format!("{method}: {e}"));
                }
                return Ok(v["result"].clone());
            }
        }
    }

    fn eval(&mut self, session: &str, expr: &str) -> Value {
        let r = self
            .call(
                Some(session),
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true}),
            )
            .expect("Runtime.evaluate");
        r["result"]["value"].clone()
    }

    fn screenshot(&mut self, session: &str, name: &str) -> PathBuf {
        let r = self
            .call(
                Some(session),
                "Page.captureScreenshot",
                json!({"format": "png"}),
            )
            .expect("a screenshot");
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("png data"))
            .expect("base64");
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&path, png).expect("the screenshot is written");
        path
    }
}

impl Drop for Chrome {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Evaluates `expr` until `ok` holds for its value, at most [`WAIT`].
fn wait_eval(
    c: &mut Chrome,
    session: &str,
    expr: &str,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let until = Instant::now() + WAIT;
    loop {
        let v = c.eval(session, expr);
        if ok(&v) {
            return v;
        }
        assert!(
            Instant::now() < until,
            "{what}: {expr} is {v} after {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every node but `leader` stands for `role`; its holder and token once the holder claims it.
async fn stand_followers(
    tc: &TestCluster,
    role: &electd_client::RoleName,
    leader: NodeId,
) -> (NodeId, u64) {
    for id in tc.c.ids().into_iter().filter(|&i| i != leader) {
        let c = tc.c.client(id).unwrap().timeout(Duration::from_secs(6));
        c.stand(role, id, true).await.expect("stand");
    }
    let until = Instant::now() + WAIT;
    loop {
        for id in tc.c.ids().into_iter().filter(|&i| i != leader) {
            if let Ok((true, info)) = tc.c.client(id).unwrap().role_claim(role).await {
                return (id, info.token.expect("a token"));
            }
        }
        assert!(Instant::now() < until, "{role} not claimed after {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn the_status_page_shows_the_leader_and_follows_a_kill() {
    let Some(bin) = chromium() else {
        electd_lab::skip::skip("no chromium on PATH (scripts/test.sh installs it as root)");
        return;
    };
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 5);
    let l1 = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    let host = tc.c.ids().into_iter().find(|&i| i != l1).unwrap();
    let url = format!("http://{}/", tc.c.member(host).unwrap().addr);
    let mut chrome = Chrome::launch(&bin).expect("chromium starts");
    let target = chrome
        .call(None, "Target.createTarget", json!({"url": url}))
        .expect("a page");
    let session = chrome
        .call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        )
        .expect("a session")["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    let leader_expr = "document.body.dataset.leader";
    let named = |v: &Value| v.as_str().and_then(|s| s.parse::<NodeId>().ok());
    wait_eval(
        &mut chrome,
        &session,
        leader_expr,
        "the page names the leader",
        |v| named(v) == Some(l1),
    );
    let lanes = chrome.eval(
        &session,
        "document.querySelectorAll('tr[data-node]').length",
    );
    assert_eq!(lanes, 5, "one lane per member");
    // A named role the followers stand for: the page shows who holds it (from its node's role
    // watch), and the same holder and token after the leader's kill (a failover moves no role).
    let role = electd_client::RoleName::new("page-role").unwrap();
    let (holder, token) = rt.block_on(stand_followers(&tc, &role, l1));
    let row = format!("document.querySelector('tr[data-role-name=\"{role}\"]')?.dataset.holder");
    wait_eval(
        &mut chrome,
        &session,
        &row,
        "the page shows the role's holder",
        |v| v.as_str() == Some(&holder.to_string()),
    );
    let before = chrome.screenshot(&session, "status-page-before.png");

    tc.kill(l1);
    let gone = format!("document.querySelector('tr[data-node=\"{l1}\"]').dataset.role");
    wait_eval(
        &mut chrome,
        &session,
        &gone,
        "the killed leader's lane",
        |v| v == "unreachable",
    );
    let l2 = wait_eval(
        &mut chrome,
        &session,
        leader_expr,
        "the page names a new leader",
        |v| named(v).is_some_and(|l| l != l1),
    );
    let l2 = named(&l2).unwrap();
    let agreed = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a new agreed leader");
    assert_eq!(l2, agreed, "the page and the cluster disagree");
    let changes = chrome.eval(
        &session,
        "document.getElementById('changes').children.length",
    );
    assert!(
        changes.as_u64().is_some_and(|n| n > 0),
        "no role change listed: {changes}"
    );
    let cells = format!(
        "[...document.querySelector('tr[data-role-name=\"{role}\"]').children].map(c => c.textContent).join(' ')"
    );
    let shown = chrome.eval(&session, &cells);
    assert_eq!(
        shown,
        format!("{role} node {holder} {token}"),
        "the role stayed put"
    );
    let after = chrome.screenshot(&session, "status-page-after.png");
    eprintln!(
        "status page: leader {l1} then {l2}; screenshots {} and {}",
        before.display(),
        after.display()
    );
}
