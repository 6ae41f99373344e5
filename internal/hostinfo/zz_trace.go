package hostinfo

import (
	"fmt"
	"os"
	"time"
)

var t0 = time.Now()
var marks []string

func Mark(s string) {
	if os.Getenv("MOAT_MARKS") != "" {
		marks = append(marks, fmt.Sprintf("%7.3f %s", float64(time.Since(t0).Microseconds())/1000, s))
	}
}
func DumpMarks() {
	for _, m := range marks {
		fmt.Fprintln(os.Stderr, m)
	}
}
