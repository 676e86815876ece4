//! The one clock events and leases are measured on: `CLOCK_MONOTONIC` in nanoseconds.
//!
//! On Linux it is shared by every process of the host, so the events of different nodes can be
//! merged on one time line (`api-v1.md`, `/v1/events`). It keeps running while a process is
//! stopped with SIGSTOP, so a paused leader's lease expires in real time.

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always available on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Milliseconds to nanoseconds.
pub const fn ms(ms: u64) -> u64 {
    ms * 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_never_goes_back() {
        let mut last = mono_ns();
        for _ in 0..1000 {
            let now = mono_ns();
            assert!(now >= last);
            last = now;
        }
    }
}
