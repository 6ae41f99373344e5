package sandbox_test

import (
	"strings"
	"testing"
)

// probeSh defines shell functions for escape tests. Each tries one access
// and prints one line naming its outcome, so a test can tell "the
// sandbox refused" from "the probe failed for another reason" (a missing
// tool, a path typed wrong), which a bare `cat f || true` cannot:
//
//	try_read P    cat P            READ P | DENIED P | OTHER P: message
//	try_write P   echo x > P     WROTE P | DENIED P | OTHER P: message
//
// DENIED covers the errors a wall gives: EACCES, EPERM, EROFS and ENOENT
// (a hidden path). ENOENT is also what a typo gives, so every escape test
// pairs its DENIED with a positive control: the same probe succeeding
// where the policy allows it.
const probeSh = `
moat_outcome() {
  case $3 in
  *"Permission denied"*|*"Operation not permitted"*|*"Read-only file system"*|*"No such file"*|*"Directory nonexistent"*) echo "DENIED $2" ;;
  *) echo "OTHER $2: $3" ;;
  esac
}
try_read() { if e=$(cat -- "$1" 2>&1 >/dev/null); then echo "READ $1"; else moat_outcome read "$1" "$e"; fi; }
try_write() { if e=$( (echo x > "$1") 2>&1); then echo "WROTE $1"; else moat_outcome write "$1" "$e"; fi; }
`

// outcomes parses the lines probeSh's functions print: path -> READ,
// WROTE, DENIED or OTHER.
func outcomes(stdout string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(stdout, "\n") {
		word, rest, ok := strings.Cut(line, " ")
		switch word {
		case "READ", "WROTE", "DENIED", "OTHER":
			if ok {
				path, _, _ := strings.Cut(rest, ":")
				m[path] = word
			}
		}
	}
	return m
}

// wantOutcome fails t unless each path's probe printed want.
func wantOutcome(t *testing.T, stdout, want string, paths ...string) {
	t.Helper()
	got := outcomes(stdout)
	for _, p := range paths {
		if got[p] != want {
			t.Errorf("%s: outcome %q, want %s\nstdout:\n%s", p, got[p], want, stdout)
		}
	}
}
