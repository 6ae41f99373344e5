package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// connectForTest lists the sessions through the socket and prints the
// answer's status and body (MOAT_TEST_CONNECT).
func connectForTest(sock string) int {
	c := client.Unix(sock)
	defer c.Close()
	_, err := c.Sessions(context.Background())
	var ae *client.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.Code+":", ae.Message)
		return 0
	}
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	fmt.Println("ok")
	return 0
}

// A process in another user namespace than the daemon's (as every
// sandbox's command is) is refused on the unix socket, whichever daemon
// it reaches and whenever that daemon started: the run's own start-time
// check knows only the sockets of its state directory.
func TestSocketRefusesOtherUserNamespaces(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	connect := func(newUserNS bool) string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MOAT_TEST_CONNECT="+d.sock)
		if newUserNS {
			cmd.SysProcAttr = &syscall.SysProcAttr{
				Cloneflags:  syscall.CLONE_NEWUSER,
				UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
				GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
			}
		}
		cmd.Stderr = io.Discard
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("connect (user namespace %v): %v", newUserNS, err)
		}
		return strings.TrimSpace(string(out))
	}
	// Positive control: the same caller in the daemon's user namespace.
	if got := connect(false); got != "ok" {
		t.Fatalf("a caller in the daemon's user namespace: %q, want ok", got)
	}
	got := connect(true)
	if !strings.Contains(got, client.CodeForbidden) || !strings.Contains(got, "another user namespace") {
		t.Errorf("a caller in a user namespace of its own: %q, want forbidden naming the namespace", got)
	}
}
