package sandbox

import (
	"io"
	"os"
	"sync"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/termsafe"
)

// joinOutputs returns stdio with its Stdout and Stderr made one writer
// when they write to one place, so that the backend gives the command one
// pipe for both and what it writes to the two keeps its order (see
// backend.Stdio), as it would outside the sandbox:
//
//   - the same writer for both, as os/exec takes it: it becomes one that
//     takes one Write at a time, since a writer such as a bytes.Buffer
//     must not be written from two goroutines at once (the backends copy
//     a terminal's output on a goroutine of its own);
//   - two files that are one file (a shell's 2>&1, a terminal): Stderr
//     becomes Stdout. Each Write to a file is one system call, so they
//     stay files.
func joinOutputs(stdio backend.Stdio) backend.Stdio {
	if stdio.Stdout == nil {
		return stdio
	}
	if out, ok := stdio.Stdout.(*os.File); ok {
		if OneFile(out, stdio.Stderr) {
			stdio.Stderr = out
		}
		return stdio
	}
	if !backend.SameWriter(stdio.Stdout, stdio.Stderr) {
		return stdio
	}
	w := &serialWriter{w: stdio.Stdout}
	stdio.Stdout, stdio.Stderr = w, w
	return stdio
}

// OneFile reports whether aw and bw are files (*os.File) that are one file
// (device and inode): the same open file after a dup, as a shell's 2>&1
// makes stdout and stderr, or the same terminal or pipe. A caller whose
// stdout and stderr are one file keeps the order of a command's output
// by giving the same writer for both (see backend.Stdio).
func OneFile(aw, bw io.Writer) bool {
	a, ok := aw.(*os.File)
	b, ok2 := bw.(*os.File)
	if !ok || !ok2 || a == nil || b == nil {
		return false
	}
	if a == b {
		return true
	}
	ai, err := a.Stat()
	if err != nil {
		return false
	}
	bi, err := b.Stat()
	return err == nil && os.SameFile(ai, bi)
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

// Unwrap returns the writer under s, where a terminal is looked for.
func (s *serialWriter) Unwrap() io.Writer { return s.w }

// filterTerminals returns stdio with its outputs that are terminals
// filtered by term (see backend.Stdio), one writer still one.
func filterTerminals(stdio backend.Stdio, term *termsafe.Set) backend.Stdio {
	if stdio.Stdout != nil && stdio.Stdout == stdio.Stderr {
		stdio.Stdout = term.Wrap(stdio.Stdout)
		stdio.Stderr = stdio.Stdout
		return stdio
	}
	if stdio.Stdout != nil {
		stdio.Stdout = term.Wrap(stdio.Stdout)
	}
	if stdio.Stderr != nil {
		stdio.Stderr = term.Wrap(stdio.Stderr)
	}
	return stdio
}
