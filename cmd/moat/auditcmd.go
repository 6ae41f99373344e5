package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/workspace"
)

// streamFile says why a file of that Stat is no audit stream to read.
func streamFile(fi os.FileInfo, err error) error {
	if err != nil {
		return err
	}
	m := fi.Mode()
	if m.IsRegular() || m&os.ModeNamedPipe != 0 {
		return nil
	}
	kind := "special file"
	switch {
	case m.IsDir():
		kind = "directory"
	case m&os.ModeCharDevice != 0:
		kind = "character device"
	case m&os.ModeDevice != 0:
		kind = "block device"
	case m&os.ModeSocket != 0:
		kind = "socket"
	}
	return fmt.Errorf("not an audit stream: a %s, not a file or a pipe", kind)
}

// cmdAudit: moat audit verify FILE checks an audit stream's hash chain.
func cmdAudit(args []string, stdout, stderr io.Writer) int {
	const usage = "usage: moat audit verify FILE"
	if len(args) == 0 || args[0] != "verify" {
		// Its one subcommand missing: --help, or a mistake (never ok).
		_, _, code := operands("audit", usage, args, 1, 0, stderr)
		return code
	}
	files, ok, code := operands("audit verify", usage, args[1:], 1, 1, stderr)
	if !ok {
		return code
	}
	file := files[0]
	// A name a command made (a glob picked it up) is shown with what a
	// terminal would act on escaped, in the errors that name it too.
	shown := workspace.EscapeText(file)
	// A stream is read to its end: a file, or a pipe (/dev/stdin, a named
	// pipe) whose writer ends it. A directory or a device (/dev/zero, a
	// terminal) is no stream and might never end; it is refused before it
	// is opened, since a device acts when opened, and again once open, in
	// case the path was replaced in between.
	if err := streamFile(os.Stat(file)); err != nil {
		fmt.Fprintf(stderr, "moat: %s: %v\n", shown, workspace.EscapeText(err.Error()))
		return 1
	}
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", workspace.EscapeText(err.Error()))
		return 1
	}
	defer f.Close()
	if err := streamFile(f.Stat()); err != nil {
		fmt.Fprintf(stderr, "moat: %s: %v\n", shown, workspace.EscapeText(err.Error()))
		return 1
	}
	n, last, err := audit.Verify(f)
	var ce *audit.ChainError
	if errors.As(err, &ce) {
		intact := fmt.Sprintf("lines 1 to %d are intact", n)
		switch n {
		case 0:
			intact = "no line before it is known to be intact"
		case 1:
			intact = "line 1 is intact"
		}
		fmt.Fprintf(stdout, "%s:%d: chain broken: %s (%s)\n", shown, ce.Line, ce.Msg, intact)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "moat: %s: %v\n", shown, workspace.EscapeText(err.Error()))
		return 1
	}
	fmt.Fprintf(stdout, "%d records, chain intact; last record's SHA-256 %s (keep it elsewhere to detect records cut from the end)\n", n, last)
	return 0
}
