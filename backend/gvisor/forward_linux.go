package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

// forwardArg0 names the program that bridges network mode proxy inside
// the sandbox: moat's own binary, bound read-only into the sandbox under
// this name (forwardPath) and started by runsc as the container's first
// process. It listens on 127.0.0.1:ProxyPort on the sentry's loopback,
// relays each connection to moat's proxy through a unix socket bound in
// from the host (socketPath), and runs the command as its child. The
// sentry's network stack has no interface but loopback (--network=none),
// so that socket is the only way out.
const (
	forwardArg0 = "moat-gvisor-forward"
	forwardPath = "/.moat/" + forwardArg0
	socketPath  = "/.moat/proxy.sock"
)

// MaybeForward runs the forwarder, the gate that starts runsc in a
// cgroup, or the reaper, and never returns when this process is one (see
// forwardArg0, gateArg0, reapArg0); otherwise it returns at once. moat's main calls
// it first, and so must the TestMain of any test that runs gvisor Specs
// in network mode proxy.
func MaybeForward() {
	switch filepath.Base(os.Args[0]) {
	case forwardArg0:
		os.Exit(forward(os.Args[1:]))
	case gateArg0:
		os.Exit(gate())
	case reapArg0:
		os.Exit(reap(os.Args[1:]))
	}
}

// forward: PORT SOCKET -- CMD [ARGS...], or, as a session's init,
// --hold [PORT SOCKET] (hold). The command's exit status is
// forward's, and a death by signal N is 128+N, which the host side reads
// back as signal N (the container's first process cannot die of a signal
// it does not handle).
func forward(args []string) int {
	if len(args) > 0 && args[0] == holdFlag {
		return hold(args[1:])
	}
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "moat: usage: "+forwardArg0+" PORT SOCKET -- CMD...")
		return 125
	}
	if err := serveProxy(args[0], args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "moat: proxy listener: %v\n", err)
		return 125
	}
	cmd := exec.Command(args[3], args[4:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTSTP, syscall.SIGCONT, syscall.SIGWINCH)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "moat: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	go func() {
		for s := range sigs {
			syscall.Kill(-cmd.Process.Pid, s.(syscall.Signal))
		}
	}()
	cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// serveProxy listens on 127.0.0.1:port and relays each connection to
// the unix socket in the background.
func serveProxy(port, socket string) error {
	// MPTCP off: Go would try it first, and the seccomp profile refuses it.
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:"+port)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c, socket)
		}
	}()
	return nil
}

// relay joins a connection on the sandbox's loopback to moat's proxy.
func relay(c net.Conn, socket string) {
	defer c.Close()
	p, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer p.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(p, c)
		p.(*net.UnixConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, p)
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	<-done
}
