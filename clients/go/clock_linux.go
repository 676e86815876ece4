package electd

import (
	"syscall"
	"unsafe"
)

// clockBoottime is Linux's CLOCK_BOOTTIME, which counts a suspended host's sleep, as the
// node's lease does.
const clockBoottime = 7

// BootNs is now on CLOCK_BOOTTIME, in nanoseconds.
func BootNs() int64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return monoNs()
	}
	return ts.Nano()
}
