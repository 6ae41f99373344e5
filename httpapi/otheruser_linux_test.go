package httpapi_test

import (
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"testing"
)

// otherUser is an ordinary local user that the tests of a root daemon
// serving someone else act as: MOAT_TEST_USER, else moatci.
type otherUser struct {
	name     string
	uid, gid int
	// base is a directory for the test under /run, root's and mode 0755,
	// in which no other user can rename anything (see TestUIDTenants).
	base string
}

// rootServingOther skips unless the test runs as root with curl (the
// client run as the other user) and the test user present, and returns
// that user with a fresh base directory named after prefix.
func rootServingOther(t *testing.T, prefix string) *otherUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a daemon serving another user")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: it is the client run as another uid")
	}
	name := os.Getenv("MOAT_TEST_USER")
	if name == "" {
		name = "moatci"
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("no test user: %v", err)
	}
	o := &otherUser{name: name}
	o.uid, _ = strconv.Atoi(u.Uid)
	o.gid, _ = strconv.Atoi(u.Gid)
	if o.base, err = os.MkdirTemp("/run", prefix); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(o.base) })
	os.Chmod(o.base, 0o755)
	return o
}

// curl runs curl -s against the daemon's socket as the user and returns
// what it printed.
func (o *otherUser) curl(t *testing.T, sock string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("curl", append([]string{"-s", "--unix-socket", sock}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(o.uid), Gid: uint32(o.gid)}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl as %s: %v", o.name, err)
	}
	return out
}
