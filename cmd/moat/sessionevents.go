package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/workspace"
)

// cmdSessionEvents is moat session events [-f] SESSION: the session's
// audit records as JSON lines, from its start; with -f, followed until the
// session ends.
func cmdSessionEvents(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("session events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	follow := fs.Bool("f", false, "follow new records until the session ends")
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: moat session events [-f] SESSION")
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.Events(ctx, fs.Arg(0), 0, *follow, func(ev *client.AuditEvent) error {
		_, err := fmt.Fprintf(stdout, "%s\n", workspace.JSONControls(ev.Record)) // U+009D would begin an OSC
		return err
	})
	if err != nil && ctx.Err() == nil {
		return apiFail(stderr, "session events", err, "")
	}
	return 0
}
