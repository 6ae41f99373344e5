package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
)

// TestAPIFailKeepsLines: a daemon's refusal that lists what is missing,
// one item a line, is printed on those lines (before, each line end was
// printed as the two characters \n); a line end anywhere else is still
// escaped, so that a name a command made cannot start a line of its own.
func TestAPIFailKeepsLines(t *testing.T) {
	var b bytes.Buffer
	apiFail(&b, "session create", &client.Error{Code: "sandbox_refused", Message: "refusing to run:\n  memory limit not enforced\n(see moat doctor)"}, "")
	if got := b.String(); got != "moat session create: refusing to run:\n  memory limit not enforced\n(see moat doctor) (sandbox_refused)\n" {
		t.Errorf("printed %q", got)
	}
	b.Reset()
	apiFail(&b, "exec", &client.Error{Code: "bad_request", Message: "no file a\nmoat: fake"}, "")
	if strings.Count(b.String(), "\n") != 1 {
		t.Errorf("a line end in a name started a line: %q", b.String())
	}
}

// TestSessionFlagConflicts: flags that cannot both hold, and arguments a
// command takes none of, are refused before any daemon is asked.
func TestSessionFlagConflicts(t *testing.T) {
	for _, args := range [][]string{
		{"session", "create", "--temp", "--workspace", "/tmp"},
		{"session", "ls", "extra"},
	} {
		var errb bytes.Buffer
		if code := realMain(args, strings.NewReader(""), &bytes.Buffer{}, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, %q", args, code, errb.String())
		}
	}
}
