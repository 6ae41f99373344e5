package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
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

// connectAndPass connects to sock, passes the connection to the parent
// over fd 3 and exits (MOAT_TEST_CONNECT_PASS).
func connectAndPass(sock string) int {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A connection made by a process of another user namespace, passed on
// before that process ended, whose pid a host process then took before
// the daemon accepted it, is refused: the daemon read the namespace by
// pid, and a sandbox could hold the accept back (filling the daemon's
// fds) and wrap the pid counter. Root only: the test sets the next pid.
func TestSocketRefusesAReusedPeerPid(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to choose the next pid (/proc/sys/kernel/ns_last_pid)")
	}
	dir := t.TempDir()
	m, err := daemon.New(daemon.Config{StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	sock := filepath.Join(dir, "moat.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if probe, err := net.Dial("unix", sock); err == nil {
		f, _ := probe.(*net.UnixConn).File()
		_, perr := unix.GetsockoptInt(int(f.Fd()), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
		f.Close()
		probe.Close()
		if a, err := l.Accept(); err == nil {
			a.Close()
		}
		if perr != nil {
			// Linux before 6.5: the check reads the pid alone, and a
			// reused one is the limitation docs/security.md names.
			t.Skipf("this kernel gives no pidfd of a socket's peer (SO_PEERPIDFD: %v)", perr)
		}
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	parent, child := os.NewFile(uintptr(pair[0]), "parent"), os.NewFile(uintptr(pair[1]), "child")
	defer parent.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MOAT_TEST_CONNECT_PASS="+sock)
	cmd.ExtraFiles = []*os.File{child}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the connecting child: %v %s", err, out)
	}
	child.Close()
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(pair[0], make([]byte, 1), oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("no connection passed: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("no connection passed: %v", err)
	}
	conn := os.NewFile(uintptr(fds[0]), "conn")
	defer conn.Close()

	// A host process takes the ended child's pid.
	pid := cmd.Process.Pid
	var taker *exec.Cmd
	for try := 0; try < 5 && taker == nil; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot choose the next pid: %v", err)
		}
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == pid {
			taker = c
		} else {
			c.Process.Kill()
			c.Wait()
		}
	}
	if taker == nil {
		t.Skip("another process kept taking the pid")
	}
	defer func() { taker.Process.Kill(); taker.Wait() }()

	hs := (&httpapi.Server{Manager: m}).HTTPServer()
	go hs.Serve(l)
	defer hs.Close()
	conn.Write([]byte("GET /v1/sessions HTTP/1.1\r\nHost: moat\r\n\r\n"))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a passed connection whose pid a host process took: %d %s, want 403", resp.StatusCode, body)
	}
}
