package gvisor

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// holdFlag makes the forwarder a session's init (hold).
const holdFlag = "--hold"

// holdReady is what hold writes on its stdout once it runs (and, in
// network mode proxy, listens): the host side takes it as the sign that
// the container has started and takes exec requests.
const holdReady = "ready\n"

// hold is the first process of a session's container: it holds the
// container open while the session's commands come and go (runsc exec),
// serves the proxy's listener in network mode proxy, and reaps the
// orphans the sentry gives it as the PID namespace's init. It reads
// nothing and takes no requests: nothing inside can talk to it, and it
// runs as a user of its own (holdUID), so the commands cannot signal it
// either. It ends only when the container is killed.
func hold(args []string) int {
	switch len(args) {
	case 0:
	case 2:
		if err := serveProxy(args[0], args[1]); err != nil {
			fmt.Fprintf(os.Stderr, "moat: proxy listener: %v\n", err)
			return 125
		}
	default:
		fmt.Fprintln(os.Stderr, "moat: usage: "+forwardArg0+" "+holdFlag+" [PORT SOCKET]")
		return 125
	}
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	os.Stdout.WriteString(holdReady)
	for {
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		<-children
	}
}
