package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/workspace"
)

// cmdSessionReview is moat session diff|apply|discard SESSION: the
// review of an overlay or copy session by the daemon, which ends the
// session first if it is live.
func cmdSessionReview(cmd string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("session "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	var format *string
	var exclude, force listFlag
	var keep, stat, asJSON *bool
	switch cmd {
	case "diff":
		format = fs.String("format", "unified", "unified, summary, patch or json")
		stat = fs.Bool("stat", false, "same as --format summary, as moat diff takes it")
		asJSON = fs.Bool("json", false, "same as --format json")
		fs.Var(&exclude, "exclude", "leave out paths matching `GLOB` (repeatable)")
	case "apply":
		fs.Var(&force, "force", "apply `PATH` despite a protected path or a host change (repeatable)")
		keep = fs.Bool("keep", false, "keep the change set after applying all of it")
	}
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() < 1 || (cmd != "apply" && fs.NArg() > 1) {
		paths := ""
		if cmd == "apply" {
			paths = " [PATHS...]"
		}
		fmt.Fprintf(stderr, "usage: moat session %s [flags] SESSION%s\n", cmd, paths)
		return 2
	}
	id := fs.Arg(0)
	c := connect(*sock)
	defer c.Close()
	ctx := context.Background()
	switch cmd {
	case "diff":
		if *stat {
			*format = "summary"
		} else if *asJSON {
			*format = "json"
		}
		out, err := c.Diff(ctx, id, *format, exclude)
		if err != nil {
			return apiFail(stderr, "session diff", err, "")
		}
		stdout.Write(out)
	case "apply":
		rep, err := c.Apply(ctx, id, &client.ApplyRequest{Paths: fs.Args()[1:], Force: force, Keep: *keep})
		var ae *client.Error
		if errors.As(err, &ae) && (ae.Code == client.CodeProtected || ae.Code == client.CodeConflict) {
			fmt.Fprintf(stderr, "moat session apply: %s\n", workspace.EscapeText(ae.Message))
			for _, d := range ae.Details {
				fmt.Fprintf(stderr, "  %s\n", workspace.EscapeText(d))
			}
			return 1
		}
		if err != nil {
			return apiFail(stderr, "session apply", err, "")
		}
		for _, r := range rep.Recovered {
			fmt.Fprintf(stderr, "moat session apply: %s\n", workspace.EscapeText(r))
		}
		for _, ch := range rep.Applied {
			fmt.Fprintf(stdout, "%-8s %s\n", ch.Kind, workspace.QuoteName(ch.Path))
		}
		for _, p := range rep.Forced {
			fmt.Fprintf(stderr, "moat session apply: forced over a host change: %s\n", workspace.QuoteName(p))
		}
		for _, p := range rep.ProtectedForced {
			fmt.Fprintf(stderr, "moat session apply: forced a protected path, which host tools run or read: %s\n", workspace.QuoteName(p))
		}
		for _, ch := range rep.Skipped {
			fmt.Fprintf(stderr, "moat session apply: skipped special file %s\n", workspace.QuoteName(ch.Path))
		}
	case "discard":
		if err := c.Discard(ctx, id); err != nil {
			return apiFail(stderr, "session discard", err, "")
		}
		fmt.Fprintf(stdout, "discarded %s\n", id)
	}
	return 0
}
