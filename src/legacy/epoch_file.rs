//! The legacy modes' epoch counter in stable storage: the highest epoch (group number, in the
//! invitation algorithm) a node has seen or made, kept in its data dir, so that a restarted
//! node never makes a number it made before. Garcia-Molina keeps the invitation algorithm's
//! group counter in stable storage (section 5, "Counter"); the bully and ring epochs are kept
//! the same way.
//!
//! The file holds one decimal number and a newline. It is written aside, synced, renamed over
//! and the directory synced, before any message that names the new epoch leaves the node
//! (`node.rs`, `apply`), so a crash leaves either the old number or the new one.

use std::collections::BTreeSet;
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

/// How many epochs above the stored one [`EpochNames`] keeps of each kind: past it the lowest
/// goes, which only withholds more (a bound on what a long disk failure can cost in memory).
const KEPT: usize = 1024;

/// Which epochs a node's messages may name while some are not stored (issue 48, item 5): an
/// epoch at or below the stored one; above it, only one a member named to this node (that
/// member made and stored it) and this node did not make itself. An epoch this node made
/// stays unnamed until stored, whoever names the same number back: after a restart from the
/// stored number the node could make that number again, for another group. (The rule before
/// compared numbers only: once a member named N, the node's own unstored N left too.)
///
/// I/O-free: `node.rs` tells it what members named ([`EpochNames::heard`]) and what the
/// algorithm named ([`EpochNames::named`]), under the algorithm's lock, in the order they
/// happened.
#[derive(Debug, Default)]
pub struct EpochNames {
    /// Epochs above the stored one that a member named to this node.
    heard: BTreeSet<u64>,
    /// Epochs above the stored one this node made (named before any member named them).
    made: BTreeSet<u64>,
    /// Every epoch up to this one was made here or dropped from `made` past [`KEPT`]: none is
    /// named above the stored one.
    made_below: u64,
}

impl EpochNames {
    /// A member named `epoch` to this node, `stored` being the number stored.
    pub fn heard(&mut self, epoch: u64, stored: u64) {
        if epoch > stored && self.heard.insert(epoch) && self.heard.len() > KEPT {
            self.heard.pop_first();
        }
    }

    /// The algorithm names `epochs` (its own and its messages'), `stored` being the number
    /// stored after the write that tried to store them: those above it that no member named
    /// first are this node's own.
    pub fn named(&mut self, epochs: impl IntoIterator<Item = u64>, stored: u64) {
        for e in epochs {
            let made = e > stored && !self.heard.contains(&e) && self.made.insert(e);
            if made && self.made.len() > KEPT {
                let lowest = self.made.pop_first().unwrap_or_default();
                self.made_below = self.made_below.max(lowest);
            }
        }
        self.heard.retain(|&e| e > stored);
        self.made.retain(|&e| e > stored);
    }

    /// Whether a message may name `epoch`, `stored` being the number stored.
    pub fn may_name(&self, epoch: u64, stored: u64) -> bool {
        epoch <= stored
            || (self.heard.contains(&epoch)
                && !self.made.contains(&epoch)
                && epoch > self.made_below)
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

    /// The node's own unstored epoch stays unnamed when a member names the same number
    /// back; a number a member made first may be named; storing frees both.
    #[test]
    fn an_epoch_made_here_is_named_only_once_stored() {
        let mut n = EpochNames::default();
        n.named([5], 0);
        assert!(!n.may_name(5, 0), "made here, not stored");
        n.heard(5, 0);
        assert!(!n.may_name(5, 0), "a member naming 5 back does not free it");
        n.heard(9, 0);
        n.named([9], 0);
        assert!(n.may_name(9, 0), "9 was a member's first");
        n.named([5, 9], 5);
        assert!(
            n.may_name(5, 5) && n.may_name(9, 5),
            "5 stored; 9 still a member's"
        );
        assert!(!n.may_name(6, 5), "nobody named 6");
    }

    /// Past [`KEPT`] made epochs, the lowest ones are forgotten by a floor that withholds
    /// every epoch up to them, heard or not.
    #[test]
    fn forgotten_epochs_made_here_stay_withheld() {
        let mut n = EpochNames::default();
        n.heard(3, 0);
        n.named(10..10 + KEPT as u64 + 1, 0);
        assert_eq!(n.made.len(), KEPT);
        assert!(
            !n.may_name(10, 0) && !n.may_name(3, 0),
            "at or below the floor"
        );
    }
}
