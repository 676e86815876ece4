//go:build !linux

package electd

// BootNs is now on the monotonic clock, in nanoseconds (CLOCK_BOOTTIME is Linux's).
func BootNs() int64 { return monoNs() }
