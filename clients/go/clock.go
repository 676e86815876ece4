package electd

import "time"

var start = time.Now()

// monoNs is Go's monotonic clock since the package started, in nanoseconds.
func monoNs() int64 { return int64(time.Since(start)) }
