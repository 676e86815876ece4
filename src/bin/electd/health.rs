//! `electd run --role NAME --health-cmd CMD | --health-url URL`: candidacy that follows the
//! application's health. The check runs every `--health-interval-ms`; while it fails the node
//! withdraws from the role and, if it holds it, gives it up (a resign: the node stops claiming
//! at once, so the supervisor stops CMD, and releases once its promises have ended); once it
//! passes again the node stands again. A check that takes longer than `--health-timeout-ms`
//! fails, and its command's process group is killed. docs/applications.md, "electd run".

use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::sync::watch;

/// The flags of the health check.
#[derive(clap::Args, Debug, Clone)]
pub struct HealthArgs {
    /// With --role: a shell command (sh -c) that exits 0 while the application is healthy, run
    /// every --health-interval-ms. While it fails the node withdraws from the role and gives it
    /// up if it holds it; once it passes the node stands again.
    #[arg(long, value_name = "CMD", requires = "role")]
    pub health_cmd: Option<String>,
    /// With --role: an http:// URL that answers GET with 2xx while the application is healthy
    /// (as --health-cmd; with both, both must pass). It must not be served by CMD itself, which
    /// runs only once the node holds the role.
    #[arg(long, value_name = "URL", requires = "role", value_parser = http_url)]
    pub health_url: Option<String>,
    /// How often the health check runs, ms.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub health_interval_ms: u64,
    /// A health check that takes longer fails (its command's process group is killed), ms;
    /// below --health-interval-ms.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub health_timeout_ms: u64,
}

/// `--health-url`'s value, or why it is not one.
fn http_url(s: &str) -> Result<String, String> {
    match reqwest::Url::parse(s) {
        Ok(u) if u.scheme() == "http" && u.host().is_some() => Ok(s.to_string()),
        // https: this client trusts no roots (electd's clients trust the cluster's CA only).
        Ok(u) => Err(format!(
            "{s:?} is not an http:// URL (scheme {:?}); for https, use --health-cmd with curl",
            u.scheme()
        )),
        Err(e) => Err(format!("{s:?} is not a URL: {e}")),
    }
}

/// A check's outcome: `Ok` healthy, `Err` why not.
pub type Outcome = Result<(), String>;

impl HealthArgs {
    /// Whether a check is configured.
    pub fn configured(&self) -> bool {
        self.health_cmd.is_some() || self.health_url.is_some()
    }

    /// Why the flags cannot run together, if so.
    pub fn invalid(&self) -> Option<String> {
        let (interval, timeout) = (self.health_interval_ms, self.health_timeout_ms);
        (self.configured() && (timeout == 0 || timeout >= interval)).then(|| {
            format!(
                "--health-timeout-ms ({timeout}) must be above 0 and below --health-interval-ms ({interval})"
            )
        })
    }

    /// One check: the command, then the URL, each within the timeout.
    pub async fn check(&self) -> Outcome {
        let timeout = Duration::from_millis(self.health_timeout_ms);
        if let Some(cmd) = &self.health_cmd {
            check_cmd(cmd, timeout).await?;
        }
        if let Some(url) = &self.health_url {
            check_url(url, timeout).await?;
        }
        Ok(())
    }

    /// The checks started ([`HealthArgs::spawn`]) and the first one's outcome in, with their
    /// task (stopped when dropped); nothing without a check.
    pub async fn started(
        &self,
    ) -> (
        Option<watch::Receiver<Option<Outcome>>>,
        Option<tokio_util::task::AbortOnDropHandle<()>>,
    ) {
        if !self.configured() {
            return (None, None);
        }
        let (mut rx, task) = self.clone().spawn();
        let _ = rx.changed().await;
        (
            Some(rx),
            Some(tokio_util::task::AbortOnDropHandle::new(task)),
        )
    }

    /// Runs the check every interval on a task of its own and sends each outcome (every one,
    /// so that a candidacy change that failed is tried again at the next check).
    pub fn spawn(
        self,
    ) -> (
        watch::Receiver<Option<Outcome>>,
        tokio::task::JoinHandle<()>,
    ) {
        let (tx, rx) = watch::channel(None);
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(self.health_interval_ms));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if tx.send(Some(self.check().await)).is_err() {
                    return;
                }
            }
        });
        (rx, task)
    }
}

/// `sh -c cmd` in a process group of its own: healthy when it exits 0 within `timeout`; past
/// it, the group is killed.
async fn check_cmd(cmd: &str, timeout: Duration) -> Outcome {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("--health-cmd cannot start: {e}"))?;
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("--health-cmd {status}")),
        Ok(Err(e)) => Err(format!("--health-cmd: {e}")),
        Err(_) => {
            if let Some(group) = child.id().and_then(|p| Pid::from_raw(p as i32)) {
                let _ = rustix::process::kill_process_group(group, Signal::KILL);
            }
            let _ = child.wait().await;
            Err(format!(
                "--health-cmd took more than {} ms",
                timeout.as_millis()
            ))
        }
    }
}

/// `GET url`: healthy on a 2xx within `timeout`.
async fn check_url(url: &str, timeout: Duration) -> Outcome {
    let http = electd_client::http_client()
        .timeout(timeout)
        .build()
        .map_err(|e| format!("--health-url: {e}"))?;
    match http.get(url).send().await {
        Ok(res) if res.status().is_success() => Ok(()),
        Ok(res) => Err(format!("--health-url answered {}", res.status())),
        Err(e) if e.is_timeout() => Err(format!(
            "--health-url did not answer within {} ms",
            timeout.as_millis()
        )),
        Err(e) => Err(format!("--health-url: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cmd: Option<&str>, url: Option<&str>) -> HealthArgs {
        HealthArgs {
            health_cmd: cmd.map(str::to_string),
            health_url: url.map(str::to_string),
            health_interval_ms: 1000,
            health_timeout_ms: 300,
        }
    }

    #[tokio::test]
    async fn a_command_passes_fails_and_is_killed_when_it_hangs() {
        assert_eq!(args(Some("true"), None).check().await, Ok(()));
        let failed = args(Some("exit 3"), None).check().await.unwrap_err();
        assert!(failed.contains("exit status: 3"), "{failed}");
        // A check that hangs, with a child of its own in its group: both killed at the timeout.
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let cmd = format!("sleep 60 & echo $! > {}; wait", pid_file.display());
        let start = std::time::Instant::now();
        let hung = args(Some(&cmd), None).check().await.unwrap_err();
        assert!(hung.contains("took more than 300 ms"), "{hung}");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "bounded: {:?}",
            start.elapsed()
        );
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            rustix::process::test_kill_process(Pid::from_raw(pid).unwrap()).is_err()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true)
        });
        assert!(gone, "the hung check's own child was not killed");
    }

    #[tokio::test]
    async fn a_url_that_refuses_or_is_not_http_fails_with_its_reason() {
        let refused = args(None, Some("http://127.0.0.1:9/health")).check().await;
        assert!(refused.unwrap_err().starts_with("--health-url"));
        assert!(http_url("ftp://x/").is_err() && http_url("not a url").is_err());
        assert!(http_url("https://127.0.0.1/health").is_err());
        assert!(http_url("http://127.0.0.1:8080/health").is_ok());
        assert!(args(Some("true"), None).invalid().is_none());
        let slow = HealthArgs {
            health_timeout_ms: 1000,
            ..args(Some("true"), None)
        };
        assert!(slow
            .invalid()
            .unwrap()
            .contains("below --health-interval-ms"));
    }
}
