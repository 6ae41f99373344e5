package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain serves, in a child the test starts as another user, an HTTP
// answer on the unix socket MOAT_TEST_FOREIGN_LISTEN names.
func TestMain(m *testing.M) {
	if p := os.Getenv("MOAT_TEST_FOREIGN_LISTEN"); p != "" {
		l, err := net.Listen("unix", p)
		if err != nil {
			os.Exit(3)
		}
		os.Chmod(p, 0o777)
		http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"sessions":[]}`))
		}))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestUnixOwnRefusesAnotherUsersDaemon: a client of the default socket
// (UnixOwn) sends nothing to a daemon another user runs there, as one
// who made the socket's directory first in a shared /tmp would (the
// client sent it the caller's policy and commands, found by a tester);
// the same socket named explicitly (Unix) is reached, which shows the
// listener answers (the control).
func TestUnixOwnRefusesAnotherUsersDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the other user's listener")
	}
	// A directory, and a copy of the test binary, the other user can
	// reach (t.TempDir's parent is root's alone).
	dir, err := os.MkdirTemp("", "moat-foreign-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	bin := filepath.Join(dir, "client.test")
	if data, err := os.ReadFile(os.Args[0]); err != nil || os.WriteFile(bin, data, 0o755) != nil {
		t.Fatalf("copy the test binary: %v", err)
	}
	sock := filepath.Join(dir, "moat.sock")
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "MOAT_TEST_FOREIGN_LISTEN="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 500 {
			t.Fatal("the other user's listener did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if uid, err := ServingUID(sock); err != nil || uid != 65534 {
		t.Fatalf("ServingUID = %d, %v; want 65534", uid, err)
	}
	ctx := context.Background()
	_, err = UnixOwn(sock).Sessions(ctx)
	if !errors.Is(err, ErrForeignDaemon) || !strings.Contains(err.Error(), "served by uid 65534") {
		t.Errorf("UnixOwn: %v, want ErrForeignDaemon naming uid 65534", err)
	}
	if _, err := Unix(sock).Sessions(ctx); err != nil {
		t.Errorf("control: Unix: %v", err)
	}
}
