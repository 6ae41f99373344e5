package sandbox

import (
	"io"
	"os"
	"sync"

	"github.com/moatbox/moat/backend"
)

// serialWriters returns stdio with its Stdout and Stderr made one writer
// that takes one Write at a time when the caller gave the same writer for
// both, as os/exec does: the backends copy the two streams on goroutines
// of their own, and a writer such as a bytes.Buffer given for both would
// otherwise be written at once from two and lose output. A file needs
// none (each Write is one system call), and stays a file.
func serialWriters(stdio backend.Stdio) backend.Stdio {
	if stdio.Stdout == nil || !sameWriter(stdio.Stdout, stdio.Stderr) {
		return stdio
	}
	if _, ok := stdio.Stdout.(*os.File); ok {
		return stdio
	}
	w := &serialWriter{w: stdio.Stdout}
	stdio.Stdout, stdio.Stderr = w, w
	return stdio
}

// sameWriter reports whether a and b are the same writer; false for a
// type that cannot be compared (comparing it would panic).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// serialWriter is a writer that passes on one Write at a time.
type serialWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *serialWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
