package pipefd

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLazyPipeLeavesWhatIsNotRead: a reader that takes one line of the
// relayed pipe leaves the rest of the source to the next reader, as it
// would holding the source itself (a plain copy read ahead and lost it,
// so a `while read` loop around moat run stopped after one line; found
// by a tester). The control: a reader that reads all gets it all, and
// the source's end.
func TestLazyPipeLeavesWhatIsNotRead(t *testing.T) {
	sr, sw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	sw.WriteString("one\ntwo\nthree\n")
	r, finish, err := LazyPipe(sr)
	if err != nil {
		t.Fatal(err)
	}
	// The command reads one line, a byte at a time, as a shell's read
	// does.
	var line []byte
	b := make([]byte, 1)
	for {
		if _, err := r.Read(b); err != nil {
			t.Fatal(err)
		}
		line = append(line, b[0])
		if b[0] == '\n' {
			break
		}
	}
	time.Sleep(50 * time.Millisecond) // the relay's look at what was read
	r.Close()
	finish()
	if string(line) != "one\n" {
		t.Fatalf("the command read %q", line)
	}
	sw.Close()
	rest, _ := io.ReadAll(sr)
	if string(rest) != "two\nthree\n" {
		t.Errorf("the next reader got %q, want the two lines not read", rest)
	}

	// The control: everything, then the end.
	sr2, sw2, _ := os.Pipe()
	defer sr2.Close()
	r2, finish2, err := LazyPipe(sr2)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := 0; i < 1000; i++ {
			sw2.WriteString(strings.Repeat("x", 999) + "\n")
		}
		sw2.Close()
	}()
	n := 0
	sc := bufio.NewScanner(r2)
	for sc.Scan() {
		n++
	}
	r2.Close()
	finish2()
	if n != 1000 {
		t.Errorf("the command read %d lines, want 1000", n)
	}
}
