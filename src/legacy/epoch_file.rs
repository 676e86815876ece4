//! The legacy modes' epoch counter in stable storage: the highest epoch (group number, in the
//! invitation algorithm) a node has seen or made, kept in its data dir, so that a restarted
//! node never makes a number it made before. Garcia-Molina keeps the invitation algorithm's
//! group counter in stable storage (section 5, "Counter"); the bully and ring epochs are kept
//! the same way.
//!
//! The file holds one decimal number and a newline. It is written aside, synced, renamed over
//! and the directory synced, before any message that names the new epoch leaves the node
//! (`node.rs`, `apply`), so a crash leaves either the old number or the new one.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file's name in the data dir.
pub const EPOCH_FILE: &str = "legacy-epoch";

/// The epoch file of one data dir, and the number last written to it.
#[derive(Debug)]
pub struct EpochFile {
    path: PathBuf,
    stored: u64,
    /// Why the last write failed, until one succeeds.
    failure: Option<(u64, String)>,
}

impl EpochFile {
    /// Opens `dir`'s epoch file: the number it holds (0 when there is none). A file that is
    /// not a number is an error naming it (nothing is overwritten).
    pub fn open(dir: &Path) -> Result<EpochFile, String> {
        let path = dir.join(EPOCH_FILE);
        let stored = match fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<u64>().map_err(|e| {
                format!(
                    "{}: not an epoch ({e}); move it aside to start from the epochs the other \
                     members send",
                    path.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Ok(EpochFile {
            path,
            stored,
            failure: None,
        })
    }

    /// The number last stored.
    pub fn stored(&self) -> u64 {
        self.stored
    }

    /// `Err` naming the file, the epoch and the error while an epoch could not be stored.
    pub fn health(&self) -> Result<(), String> {
        match &self.failure {
            None => Ok(()),
            Some((epoch, why)) => Err(format!(
                "epoch file {}: epoch {epoch} not stored ({why}); {} is; messages naming an \
                 epoch this node made above it are withheld",
                self.path.display(),
                self.stored
            )),
        }
    }

    /// Stores `epoch` durably if it is above the number stored.
    pub fn raise(&mut self, epoch: u64) -> std::io::Result<()> {
        if epoch <= self.stored {
            return Ok(());
        }
        let written = self.write(epoch);
        self.failure = written.as_ref().err().map(|e| (epoch, e.to_string()));
        written
    }

    fn write(&mut self, epoch: u64) -> std::io::Result<()> {
        let tmp = self.path.with_extension("tmp");
        let mut f = fs::File::create(&tmp)?;
        writeln!(f, "{epoch}")?;
        f.sync_all()?;
        fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            fs::File::open(dir)?.sync_all()?;
        }
        self.stored = epoch;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_survives_a_reopen_and_never_goes_down() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = EpochFile::open(dir.path()).unwrap();
        assert_eq!(f.stored(), 0);
        f.raise(7).unwrap();
        f.raise(3).unwrap();
        assert_eq!(EpochFile::open(dir.path()).unwrap().stored(), 7);
        fs::write(dir.path().join(EPOCH_FILE), "seven\n").unwrap();
        let e = EpochFile::open(dir.path()).unwrap_err();
        assert!(e.contains("legacy-epoch: not an epoch"), "{e}");
    }
}
