//! `/v1/health` means something, on real processes: a node whose event log's disk fills up
//! answers 503 naming the event log (and the legacy epoch file it cannot raise) while it keeps
//! running, following and serving its watchers, writes the
//! waiting events once the disk takes writes again (the file has every event, in order) and
//! answers 200 again; and a watch stream says when events are missing from the log instead of
//! skipping them. (A quorum node whose vote and log cannot be written: the unit test
//! `a_failing_state_write_makes_the_engine_unhealthy` in `src/quorum/node/tests.rs`; the binary exits.)

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{TestCluster, TEST_TIMING};
use electd_client::{Client, Error, Mode, NodeId, Role};

const WAIT: Duration = Duration::from_secs(15);

/// Until `f` answers `Some`, at most `limit`.
async fn until<T, F: std::future::Future<Output = Option<T>>>(
    limit: Duration,
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < end, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Node `id`'s view until `want` holds for it.
async fn until_view(c: &Client, what: &str, want: impl Fn(Role, Option<NodeId>) -> bool) {
    until(WAIT, what, || async {
        let i = c.leader().await.ok()?;
        want(i.role, i.leader.map(|l| l.id)).then_some(())
    })
    .await
}

/// Fills the file system of `path` with a file there, until it refuses more (bounded).
fn fill(path: &std::path::Path) {
    let mut f = std::fs::File::create(path).expect("the filler");
    let chunk = vec![0u8; 16 * 1024];
    for _ in 0..10_000 {
        if f.write_all(&chunk).and_then(|()| f.flush()).is_err() {
            return;
        }
    }
    panic!("{} never filled up", path.display());
}

#[test]
fn a_full_disk_makes_the_node_unhealthy_and_its_events_wait_for_the_disk() {
    if !rustix::process::geteuid().is_root() {
        electd_lab::skip::skip("a tmpfs of the node's own needs root (mount)");
        return;
    }
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Bully, 3, TEST_TIMING);
    tc.c.small_disks.insert(1, 256 * 1024);
    for id in tc.c.ids() {
        tc.start_node(id);
    }
    let one = tc.c.client(1).unwrap();
    rt.block_on(async {
        until_view(&one, "node 1 follows node 3", |_, l| l == Some(3)).await;
        assert_eq!(one.health().await.expect("healthy").status, "ok");
        // Its own client: the cluster's gives every request 800 ms, a stream's body included.
        let addr = tc.c.member(1).unwrap().addr.clone();
        let watcher = Client::new(addr, Duration::from_secs(2));
        let mut watch = watcher.watch(None).await.expect("a watch stream");

        let filler = tc.c.disk_path(1, "filler").expect("node 1 runs");
        fill(&filler);
        // Lines may still fit in the last page of the event file: cut the leader off and let
        // it back in, so that node 1 follows 2 then 3 again, until a role change finds the
        // disk full (bounded). Node 1 makes no epoch of its own this way: one it made and
        // could not store would be named by no message (legacy/node.rs), and a bully node
        // that leads alone on such an epoch stays there until its disk takes writes.
        let mut unhealthy = None;
        for _ in 0..40 {
            tc.c.partition(&[vec![3], vec![1, 2]]).await.unwrap();
            until_view(&one, "node 1 follows 2", |_, l| l == Some(2)).await;
            tc.c.heal().await.unwrap();
            until_view(&one, "node 1 follows 3 again", |_, l| l == Some(3)).await;
            match one.health().await {
                Err(e) if e.to_string().contains("event log") => {
                    unhealthy = Some(e);
                    break;
                }
                // The epochs it adopts find the disk full first (a new file).
                Err(e) => assert!(e.to_string().contains("legacy-epoch"), "{e}"),
                Ok(_) => {}
            }
        }
        let e = unhealthy.expect("the event log not named after 40 cycles on a full disk");
        assert_eq!(e.status(), Some(503), "{e}");
        assert_eq!(e.code(), Some("unhealthy"), "{e}");

        // The node runs on and its watchers get every event, written or not.
        let recorded = one.events(0, 10_000).await.unwrap().events;
        let last = recorded.last().expect("events").seq;
        let mut seen = 0;
        while seen < last {
            let w = tokio::time::timeout(WAIT, watch.next())
                .await
                .expect("the watch goes on")
                .expect("no error")
                .expect("not ended");
            seen = w.id;
        }

        std::fs::remove_file(&filler).unwrap();
        until(Duration::from_secs(5), "healthy again", || async {
            one.health().await.ok()
        })
        .await;
        let text = std::fs::read_to_string(tc.c.disk_path(1, "events.jsonl").unwrap()).unwrap();
        let seqs: Vec<u64> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<electd_client::Event>(l).ok())
            .map(|e| e.seq)
            .collect();
        let want: Vec<u64> = (1..=*seqs.last().unwrap()).collect();
        assert_eq!(seqs, want, "the file has every event, in order, once");
        assert!(seqs.len() as u64 >= last);
    });
}

#[test]
fn a_watch_says_which_events_are_missing_from_the_log() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Bully, 1, TEST_TIMING);
    // The log of a node whose disk refused events 4 and 5 for longer than its memory held
    // them: the file jumps from 3 to 6.
    let data = tc.c.data_dir(Mode::Bully, 1);
    std::fs::create_dir_all(&data).unwrap();
    let line = |seq: u64| {
        format!(
            "{{\"seq\":{seq},\"t_mono_ns\":{seq},\"node_id\":1,\"role\":\"follower\",\
             \"term\":{seq},\"leader\":null}}\n"
        )
    };
    let text: String = [1, 2, 3, 6, 7].into_iter().map(line).collect();
    std::fs::write(data.join("events.jsonl"), text).unwrap();
    tc.start_node(1);
    let one = tc.c.client(1).unwrap();
    rt.block_on(async {
        until(WAIT, "node 1 answers", || async { one.health().await.ok() }).await;
        let addr = tc.c.member(1).unwrap().addr.clone();
        let watcher = Client::new(addr, Duration::from_secs(2));
        let mut watch = watcher.watch(Some(0)).await.expect("a watch stream");
        let mut seen = Vec::new();
        while seen.len() < 6 {
            let next = tokio::time::timeout(WAIT, watch.next())
                .await
                .expect("the watch goes on");
            seen.push(match next {
                Ok(Some(w)) => format!("event {}", w.id),
                Err(Error::Gap { gap, .. }) => format!("gap {}..={}", gap.from, gap.to),
                other => panic!("{other:?}"),
            });
        }
        assert_eq!(
            seen,
            [
                "event 1",
                "event 2",
                "event 3",
                "gap 4..=5",
                "event 6",
                "event 7"
            ]
        );
        assert_eq!(watch.last_id(), Some(7));
    });
}
