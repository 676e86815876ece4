//! The data dir's lock: one process at a time keeps a node's state in a data dir. A second
//! `electd` started on the same dir (a copied unit file, a container started twice on one
//! volume, `--force-new-cluster` on a dir whose node runs) is refused before it reads
//! anything, or two processes would vote and write the log as one member (etcd locks its WAL
//! the same way). The lock is `flock(2)` on `<data_dir>/LOCK`, held while the process runs
//! and released by the kernel when it ends, however it ends; the file itself stays, empty.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

/// The lock file's name in a data dir.
pub const LOCK_FILE: &str = "LOCK";

/// Why a data dir could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("cannot open the data dir's lock {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the data dir {dir} is in use by another electd process (it holds {LOCK_FILE}): \
         stop it first, or give this node a data_dir of its own"
    )]
    InUse { dir: PathBuf },
}

/// The lock on a data dir, held until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Takes the lock on `dir` (which exists), or says which process-wide reason refuses it.
    pub fn take(dir: &Path) -> Result<DataDirLock, DataDirError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| DataDirError::Open {
                path: path.clone(),
                source,
            })?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(DataDirLock { _file: file }),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(DataDirError::InUse {
                dir: dir.to_path_buf(),
            }),
            Err(e) => Err(DataDirError::Open {
                path,
                source: e.into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::take(dir.path()).expect("the first takes it");
        let second = DataDirLock::take(dir.path());
        assert!(
            matches!(second, Err(DataDirError::InUse { .. })),
            "{second:?}"
        );
        drop(first);
        DataDirLock::take(dir.path()).expect("free again once dropped");
    }
}
