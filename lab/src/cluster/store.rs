//! The cluster's store in mutex mode: a PostgreSQL server of the lab's own ([`Postgres`]),
//! whose URL the nodes get through their environment (`run/store-url`, mode 0600, never
//! their command line). A test or chaos cluster owns its server (stopped with the cluster);
//! the bundled cluster's runs on after `electd-lab ctl up` (`run/store.pid`, `run/store-dir`)
//! until `down`.

use std::fs;
use std::path::PathBuf;

use super::dir::{io, Cluster, CtlError};
use super::postgres::{stop_detached, Postgres};

const URL_FILE: &str = "store-url";
const PID_FILE: &str = "store.pid";
const DIR_FILE: &str = "store-dir";

impl Cluster {
    /// Starts the cluster's store on `ip:port` (unless one runs) and writes its URL for the
    /// nodes started afterwards.
    pub fn start_store(&mut self, ip: &str, port: u16) -> Result<(), CtlError> {
        if self.store.is_none() {
            let pg = Postgres::create_with_clock(
                ip,
                port,
                self.die_with_parent,
                self.store_wall_clock.clone(),
            )
            .map_err(CtlError::Store)?;
            self.store = Some(pg);
        }
        let url = self.store.as_ref().map(Postgres::url).unwrap_or_default();
        let path = self.run.join(URL_FILE);
        fs::write(&path, url + "\n").map_err(io(&path))?;
        use std::os::unix::fs::PermissionsExt;
        let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o600));
        Ok(())
    }

    /// The store's URL, for the nodes' environment, if the cluster has one.
    pub fn store_url(&self) -> Option<String> {
        fs::read_to_string(self.run.join(URL_FILE))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// Lets the store run on after this process (`ctl up`); `down` stops it.
    pub fn detach_store(&mut self) -> Result<(), CtlError> {
        let Some(pg) = self.store.take() else {
            return Ok(());
        };
        let (pid, dir) = pg.detach();
        for (name, text) in [
            (PID_FILE, pid.map(|p| p.to_string()).unwrap_or_default()),
            (DIR_FILE, dir.to_string_lossy().into_owned()),
        ] {
            let path = self.run.join(name);
            fs::write(&path, text + "\n").map_err(io(&path))?;
        }
        Ok(())
    }

    /// Stops a store that `ctl up` left running, and forgets its URL.
    pub fn stop_detached_store(&mut self) {
        drop(self.store.take());
        let read = |name: &str| fs::read_to_string(self.run.join(name)).ok();
        if let (Some(pid), Some(dir)) = (read(PID_FILE), read(DIR_FILE)) {
            if let Ok(pid) = pid.trim().parse() {
                stop_detached(pid, &PathBuf::from(dir.trim()));
            }
        }
        for name in [PID_FILE, DIR_FILE, URL_FILE] {
            let _ = fs::remove_file(self.run.join(name));
        }
    }
}
