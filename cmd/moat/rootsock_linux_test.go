package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRootDaemonSocketHiddenFromUsersRun: a root daemon on a socket of
// its choosing that lets every user in (moat serve --socket DIR/moat.sock
// --socket-mode 0666) records it where every user's run reads, and an
// ordinary user's own moat run (no daemon of its own, its own state
// directory) that would show DIR is refused: its command would reach the
// daemon as that user. The controls: the same user's run that does not
// show DIR, and one that denies the socket, run; once the daemon has
// stopped, the run that shows DIR runs too.
func TestRootDaemonSocketHiddenFromUsersRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a root daemon, and a run as another user")
	}
	name := os.Getenv("MOAT_TEST_USER")
	if name == "" {
		name = "moatci"
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("no test user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// Under a root-owned 0755 directory the user can enter.
	base, err := os.MkdirTemp("/run", "moat-rootsock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	bin := filepath.Join(base, "moat")
	if data, err := os.ReadFile(os.Args[0]); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, ws, state := filepath.Join(base, "x"), filepath.Join(base, "ws"), filepath.Join(base, "state")
	for _, d := range []string{dir, ws, state} {
		os.Mkdir(d, 0o755)
	}
	os.Chown(ws, uid, gid)
	os.Chown(state, uid, gid)
	sock := filepath.Join(dir, "moat.sock")

	serve := exec.Command(bin, "serve", "--socket", sock, "--socket-mode", "0666", "--drain", "2s")
	serve.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1", "MOAT_STATE_DIR="+filepath.Join(base, "root-state"))
	var logs bytes.Buffer
	serve.Stderr = &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			serve.Process.Signal(syscall.SIGTERM)
			serve.Wait()
		}
	}
	defer stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("moat serve did not listen:\n%s", &logs)
		}
	}

	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"run"}, args...)...)
		cmd.Dir = ws
		cmd.Env = []string{"MOAT_TEST_AS_MOAT=1", "HOME=" + u.HomeDir, "MOAT_STATE_DIR=" + state, "TMPDIR=/tmp", "PATH=/usr/local/bin:/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, errb.String()
	}
	if code, errs := run("--ro", dir, "--", "true"); code == 0 || !strings.Contains(errs, "the moat daemon's socket "+sock) {
		t.Errorf("%s's run showing %s: exit %d, %q; want the root daemon's socket refused", name, dir, code, errs)
	}
	if code, errs := run("--", "true"); code != 0 {
		t.Errorf("%s's run not showing it: exit %d, %q", name, code, errs)
	}
	if code, errs := run("--ro", dir, "--deny", sock, "--", "true"); code != 0 {
		t.Errorf("%s's run denying the socket: exit %d, %q", name, code, errs)
	}
	stop()
	if code, errs := run("--ro", dir, "--", "true"); code != 0 {
		t.Errorf("%s's run showing %s, the daemon stopped: exit %d, %q", name, dir, code, errs)
	}
}
