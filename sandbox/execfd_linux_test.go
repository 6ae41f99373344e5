package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

// fexecve starts the program its first argument names from an open
// file descriptor (execveat with AT_EMPTY_PATH, as fexecve does), under
// argv[0] "x" with the other arguments; NR is execveat's number.
const fexecve = `open(my $fh, "<", $ARGV[0]) or die "open: $!";
my @w = ("x", @ARGV[1..$#ARGV]);
my $argv = pack("p" x @w . "Q", @w, 0);
my $envp = pack("Q", 0);
my $empty = "";
syscall(NR, fileno($fh), $empty, $argv, $envp, 0x1000);
print "errno ", $!+0, "\n";
`

// TestExecCheckByDescriptor: a program started from a descriptor is
// named by the file the descriptor holds, as one started from a path is
// by that path: uname -n, denied, is refused (EACCES) under another
// argv[0]. Positive control: uname -s, allowed, runs the same way.
func TestExecCheckByDescriptor(t *testing.T) {
	nr := map[string]string{"amd64": "322", "arm64": "281"}[runtime.GOARCH]
	if nr == "" {
		t.Skipf("execveat's number on %s is not written here", runtime.GOARCH)
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "fexecve.pl"), []byte(strings.Replace(fexecve, "NR", nr, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := execPolicy(t, ws, execRules)
	for _, tc := range []struct{ arg, want string }{{"-n", "errno 13\n"}, {"-s", "Linux\n"}} {
		var out, errb bytes.Buffer
		_, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p,
			Args: []string{"perl", "fexecve.pl", "/usr/bin/uname", tc.arg}}, backend.Stdio{Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatalf("run: %v\n%s", err, errb.String())
		}
		if out.String() != tc.want {
			t.Errorf("uname %s from a descriptor: output %q, want %q (stderr %q)", tc.arg, out.String(), tc.want, errb.String())
		}
	}
}
