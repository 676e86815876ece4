//! The node's two clocks, and the [`Clock`] interface through which quorum mode reads them.
//!
//! | clock | used for | why |
//! |---|---|---|
//! | `CLOCK_BOOTTIME` ([`boot_ns`]) | claims, claim leases, the follower lease a campaign waits for | it keeps counting while the host is suspended, so a leader that resumes after a suspend sees its claim as expired, as the rest of the cluster does |
//! | `CLOCK_MONOTONIC` ([`mono_ns`]) | event stamps (`t_mono_ns` of `/v1/events`), peer contact times, tokio timers | one clock for every process of the host, so event logs of different nodes merge on one time line (`docs/design/api-v1.md`) |
//!
//! Both keep running while a process is stopped with SIGSTOP, so a paused leader's lease
//! expires in real time. openraft's own follower lease runs on tokio's `Instant`
//! (`CLOCK_MONOTONIC`): on a suspended follower host it lasts longer in real time, which only
//! makes that follower refuse votes for longer (the safe direction).

use rustix::time::{clock_gettime, ClockId};
use std::sync::Arc;

/// Where quorum mode reads the time. The node uses [`SystemClock`]; a test can stand in a
/// clock whose host "suspends" (BOOTTIME advances, MONOTONIC does not).
pub trait Clock: Send + Sync + 'static {
    /// `CLOCK_MONOTONIC`, ns: event stamps.
    fn mono_ns(&self) -> u64;
    /// `CLOCK_BOOTTIME`, ns: claims and leases.
    fn boot_ns(&self) -> u64;
    /// A MONOTONIC stamp for an instant given on BOOTTIME (`boot_at` in the past or present),
    /// so that claim boundaries can stamp events.
    fn mono_of_boot(&self, boot_at_ns: u64) -> u64 {
        let (mono, boot) = (self.mono_ns(), self.boot_ns());
        mono.saturating_sub(boot.saturating_sub(boot_at_ns))
    }
    /// Both clocks, read one after the other.
    fn read(&self) -> Reading {
        Reading {
            boot_ns: self.boot_ns(),
            mono_ns: self.mono_ns(),
        }
    }
}

/// One instant read on both clocks: an anchor from which a later instant given on BOOTTIME can
/// be stamped on MONOTONIC counting forward (see `lease::Claim::until_mono_ns`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Reading {
    pub boot_ns: u64,
    pub mono_ns: u64,
}

/// The host's clocks.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn mono_ns(&self) -> u64 {
        mono_ns()
    }
    fn boot_ns(&self) -> u64 {
        boot_ns()
    }
}

/// The clock a node runs on.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

fn read_clock(clock: ClockId) -> u64 {
    let ts = clock_gettime(clock);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn mono_ns() -> u64 {
    read_clock(ClockId::Monotonic)
}

/// Nanoseconds on `CLOCK_BOOTTIME`.
pub fn boot_ns() -> u64 {
    read_clock(ClockId::Boottime)
}

/// Milliseconds to nanoseconds.
pub const fn ms(ms: u64) -> u64 {
    ms * 1_000_000
}

#[cfg(test)]
pub mod testing {
    //! A clock for tests: starts where the host's clocks are and moves only when told.
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::Clock;

    pub struct ManualClock {
        mono: AtomicU64,
        boot: AtomicU64,
    }

    impl Default for ManualClock {
        fn default() -> ManualClock {
            ManualClock {
                mono: AtomicU64::new(super::mono_ns()),
                boot: AtomicU64::new(super::boot_ns()),
            }
        }
    }

    impl ManualClock {
        /// Time passes with the host running: both clocks move.
        pub fn advance(&self, ns: u64) {
            self.mono.fetch_add(ns, Ordering::SeqCst);
            self.boot.fetch_add(ns, Ordering::SeqCst);
        }
        /// The host is suspended for `ns`: only BOOTTIME moves.
        pub fn suspend(&self, ns: u64) {
            self.boot.fetch_add(ns, Ordering::SeqCst);
        }
    }

    impl Clock for ManualClock {
        fn mono_ns(&self) -> u64 {
            self.mono.load(Ordering::SeqCst)
        }
        fn boot_ns(&self) -> u64 {
            self.boot.load(Ordering::SeqCst)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::ManualClock;
    use super::*;

    #[test]
    fn clocks_never_go_back() {
        let (mut m, mut b) = (mono_ns(), boot_ns());
        for _ in 0..1000 {
            let (m2, b2) = (mono_ns(), boot_ns());
            assert!(m2 >= m && b2 >= b);
            (m, b) = (m2, b2);
        }
    }

    #[test]
    fn boot_instants_map_back_to_monotonic_stamps() {
        let c = ManualClock::default();
        let b0 = c.boot_ns();
        let m0 = c.mono_ns();
        c.advance(ms(5));
        assert_eq!(c.mono_of_boot(b0), m0);
        c.suspend(ms(1000));
        // Across a suspend the stamp errs early, never later than the instant really was.
        assert!(c.mono_of_boot(b0) <= m0);
    }
}
