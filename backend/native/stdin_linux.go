package native

import (
	"io"
	"os"
)

// contentsOf is a stdin that the command may not hold (see
// internal/pipefd), as a reader: its contents, without the file. A
// command then cannot seek it, which is what a pipe into `moat run` gives
// it too. A terminal never gets here as it is: Run gives the command a pty
// of its own (see terminal), and a session reads it through a pipe too.
func contentsOf(f *os.File) io.Reader {
	return struct{ io.Reader }{f}
}
