//! Disaster recovery of a quorum cluster that lost a majority of its members for good
//! (docs/operations.md, "Disaster recovery"): `--inspect-data-dir` tells which survivor holds
//! the most of the log, `--force-new-cluster` makes that survivor's data dir the whole of a
//! one-member cluster at a new term (electd::quorum::Store::force_new_cluster), and the
//! operator grows it again with `--join`. Both run on a stopped node and exit.

use std::process::ExitCode;
use std::time::Duration;

use electd::config::Config;
use electd::data_dir::DataDirLock;
use electd::quorum::Store;
use electd_client::Mode;

/// What the data dir holds, or it rewritten (`force`), for the node of `cfg`.
pub fn main(cfg: &Config, force: bool, term_above: u64) -> ExitCode {
    match recover(cfg, force, term_above) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("electd: {e}");
            ExitCode::from(1)
        }
    }
}

fn recover(cfg: &Config, force: bool, term_above: u64) -> Result<(), String> {
    if cfg.mode != Mode::Quorum {
        return Err(format!(
            "--force-new-cluster and --inspect-data-dir are for quorum mode (mode is {})",
            cfg.mode
        ));
    }
    // The node must be stopped: its state is rewritten under it otherwise.
    let listen = cfg.listen_addr();
    if std::net::TcpStream::connect_timeout(&listen, Duration::from_millis(300)).is_ok() {
        return Err(format!(
            "something answers on {listen}, this node's address: stop the node first"
        ));
    }
    if !cfg.data_dir.join(electd::quorum::SLOT_FILES[0]).exists()
        && !cfg.data_dir.join(electd::quorum::SLOT_FILES[1]).exists()
    {
        return Err(format!(
            "{} holds no state of a quorum node (data_dir)",
            cfg.data_dir.display()
        ));
    }
    // A node that runs on this dir holds its lock (electd::data_dir), whatever address it
    // listens on; held until this command exits.
    let _lock = DataDirLock::take(&cfg.data_dir).map_err(|e| e.to_string())?;
    let store = Store::open(&cfg.data_dir, cfg.id, &cfg.cluster_id).map_err(|e| e.to_string())?;
    inspect(cfg, &store);
    if !force {
        return Ok(());
    }
    force_new_cluster(cfg, &store, listen, term_above)
}

/// `--inspect-data-dir`: prints what the member's data dir holds: its last log entry, its vote
/// and the highest term.
fn inspect(cfg: &Config, store: &Store) {
    let last = store.last_log_id().map_or("none".to_string(), |l| {
        format!("term {} index {}", l.leader_id.term, l.index)
    });
    let vote = store.vote().map_or("none".to_string(), |v| {
        let state = if v.is_committed() {
            "committed"
        } else {
            "not committed"
        };
        format!(
            "term {} for node {} ({state})",
            v.leader_id().term,
            v.leader_id().voted_for().unwrap_or(0)
        )
    });
    println!(
        "member {}: last log entry {last}; vote {vote}; highest term {}",
        cfg.id,
        store.highest_term()
    );
}

/// `--force-new-cluster`: warns that it is unsafe, then makes the member (at its address in
/// the config, else `listen`) the only member of a new cluster at a term above `term_above`.
fn force_new_cluster(
    cfg: &Config,
    store: &Store,
    listen: std::net::SocketAddr,
    term_above: u64,
) -> Result<(), String> {
    let addr = cfg
        .peer_addr(cfg.id)
        .map(str::to_string)
        .unwrap_or_else(|| listen.to_string());
    eprintln!(
        "electd: UNSAFE: --force-new-cluster makes member {} the only member of a new cluster. \
         What the lost members committed after this log is lost; a lost member that comes back \
         must be wiped, never started on its old data dir (it holds votes of its own). Run it \
         on the survivor with the most of the log (--inspect-data-dir on each), then start this \
         node and add the others with --join on empty data dirs.",
        cfg.id
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (_, term) = rt
        .block_on(store.force_new_cluster(cfg.id, &addr, term_above))
        .map_err(|e| format!("{}: {e}", cfg.data_dir.display()))?
        .ok_or_else(|| format!("--term-above {term_above} leaves no term above it"))?;
    println!(
        "member {}: now the only member of a new cluster, at term {term} (its log and its \
         event log kept); start it, then add members with --join",
        cfg.id
    );
    Ok(())
}
