//! The simulated clock: tokio's paused time, read as both `CLOCK_MONOTONIC` and
//! `CLOCK_BOOTTIME`, so that every claim is judged on simulated time.

use std::sync::Arc;

use electd::clock::Clock;
use tokio::time::Instant;

/// Where simulated time starts, in ns (so that no stamp is 0).
const BASE_NS: u64 = 1_000_000_000;

/// Simulated time since the simulation started (plus [`BASE_NS`]).
#[derive(Debug)]
pub struct SimClock {
    epoch: Instant,
}

impl SimClock {
    /// A clock starting now; call it inside the simulation's runtime.
    pub fn new() -> Arc<SimClock> {
        Arc::new(SimClock {
            epoch: Instant::now(),
        })
    }

    /// Nanoseconds of simulated time.
    pub fn now_ns(&self) -> u64 {
        BASE_NS + self.epoch.elapsed().as_nanos() as u64
    }

    /// Milliseconds since the simulation started.
    pub fn elapsed_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

impl Clock for SimClock {
    fn mono_ns(&self) -> u64 {
        self.now_ns()
    }
    fn boot_ns(&self) -> u64 {
        self.now_ns()
    }
}
