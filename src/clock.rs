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

/// Resolves once `CLOCK_BOOTTIME` reaches `due_ns`: a timerfd on BOOTTIME, set for that absolute
/// instant, so that a host suspend that passes it wakes the waiter at resume. (A tokio sleep runs
/// on MONOTONIC, which stands still while the host is suspended: it would wait the rest of its
/// length out after the resume, past the instant; issue 48, item 4.) Where no timerfd can be made
/// it waits on tokio, re-reading BOOTTIME at least every 10 ms.
pub async fn until_boot(due_ns: u64) {
    if boot_ns() >= due_ns {
        return;
    }
    match boot_timer(due_ns) {
        Ok(fd) => {
            // Readable once the timer expired (its expiry count); a failed wait falls back.
            if let Ok(ready) = fd.readable().await {
                drop(ready);
                return;
            }
        }
        Err(e) => tracing::debug!("no BOOTTIME timerfd ({e}): waiting on tokio"),
    }
    while boot_ns() < due_ns {
        let left = std::time::Duration::from_nanos(due_ns.saturating_sub(boot_ns()));
        tokio::time::sleep(left.min(std::time::Duration::from_millis(10))).await;
    }
}

/// A timerfd on `CLOCK_BOOTTIME` that expires at `due_ns` (absolute), in tokio's reactor.
fn boot_timer(due_ns: u64) -> std::io::Result<tokio::io::unix::AsyncFd<rustix::fd::OwnedFd>> {
    use rustix::time::{
        timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags,
        TimerfdTimerFlags, Timespec,
    };
    let fd = timerfd_create(
        TimerfdClockId::Boottime,
        TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
    )?;
    let at = Timespec {
        tv_sec: (due_ns / 1_000_000_000) as _,
        tv_nsec: (due_ns % 1_000_000_000) as _,
    };
    let spec = Itimerspec {
        it_interval: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: at,
    };
    timerfd_settime(&fd, TimerfdTimerFlags::ABSTIME, &spec)?;
    // SAFETY: the AsyncFd owns `fd` (an OwnedFd): it stays open, and names the same timer,
    // until the AsyncFd drops it.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
            .map_err(|e| e.into())
    }
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

    /// The BOOTTIME timer wakes at its instant (not before), and at once for one past.
    #[tokio::test]
    async fn until_boot_wakes_at_the_instant() {
        let due = boot_ns() + ms(30);
        until_boot(due).await;
        assert!(boot_ns() >= due, "woke before the instant");
        let t = boot_ns();
        until_boot(t - 1).await;
        assert!(boot_ns() - t < ms(5), "an instant past waits not");
    }

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
