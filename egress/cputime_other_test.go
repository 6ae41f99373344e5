//go:build !unix

package egress

import "time"

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
