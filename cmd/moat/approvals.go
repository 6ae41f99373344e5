package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/workspace"
)

// The approval commands talk to `moat serve`: moat approvals lists what
// waits for a person, moat approve and moat deny answer it. What an
// answer may cover is the daemon's decision (package daemon).

func cmdApprovals(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("approvals", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	web := fs.Bool("web", false, "print a one-time login link to the daemon's approvals page instead")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "moat approvals: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	if *web {
		l, err := c.WebLogin(context.Background())
		if err != nil {
			return apiFail(stderr, "approvals", err, "")
		}
		if l.URL == "" {
			fmt.Fprintln(stderr, "moat approvals: the daemon has no TCP listener for a browser (moat serve --listen ADDR)")
			return exitMoatError
		}
		fmt.Fprintf(stdout, "%s\n(works once, until %s)\n", l.URL, l.Expires.Local().Format("15:04:05"))
		return 0
	}
	list, err := c.Approvals(context.Background())
	if err != nil {
		return apiFail(stderr, "approvals", err, "")
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSESSION\tWAITING\tREFUSED IN\tRULE\tACTION")
	for _, a := range list {
		what := approvalAction(a)
		if a.Dir != "" && !a.Network {
			what += "  (in " + workspace.EscapeText(a.Dir) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Session, time.Since(a.Created).Round(time.Second),
			time.Until(a.Expires).Round(time.Second), dash(workspace.EscapeText(a.Rule)), oneLine(what))
	}
	tw.Flush()
	return 0
}

// approvalAction is what a pending approval is about, on one line: the
// command line, and, when a shell line asked because of one of its
// simple commands, that command, which a prefix approval must begin
// (moat approve --scope prefix --prefix WORDS).
func approvalAction(a client.Approval) string {
	what := quotedWords(a.Command)
	if len(a.Decided) > 0 && !equalArgv(a.Decided, a.Command) {
		what += " because of " + quotedWords(a.Decided)
	}
	return oneLine(what)
}

// quotedWords is argv as %q writes a list of strings, each word quoted
// (see quoted).
func quotedWords(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = quoted(w)
	}
	return "[" + strings.Join(words, " ") + "]"
}

// oneLine keeps a table row on one line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s)
}

func cmdApprove(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("approve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	scope := fs.String("scope", "once", "once (this exact action), prefix (commands beginning --prefix, or the command asked about) or session (what the same rule asks, in this session)")
	prefix := fs.String("prefix", "", "for --scope prefix: the words the commands let through begin with (space-separated)")
	ttl := durationFlag(fs, "for", 0, "how long a prefix or session approval lasts (default 15m; at most 24h)")
	name := fs.String("name", "", "who approves, recorded in the audit stream")
	why := fs.String("reason", "", "why, recorded in the audit stream")
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: moat approve [--scope once|prefix|session] [--for DURATION] ID")
		return 2
	}
	forSet := false
	fs.Visit(func(f *flag.Flag) { forSet = forSet || f.Name == "for" })
	if forSet && *ttl <= 0 {
		fmt.Fprintf(stderr, "moat approve: --for %s: an approval lasts a while above 0, at most 24h (default 15m)\n", *ttl)
		return 2
	}
	req := &client.ApproveRequest{Scope: *scope, Name: *name, Why: *why}
	if *scope != "once" {
		d := *ttl
		if d == 0 {
			d = defaultTTL
		}
		req.For = d.String()
	} else if *ttl != 0 {
		fmt.Fprintln(stderr, "moat approve: --for is for a prefix or session approval (once is used up at once)")
		return 2
	}
	if *prefix != "" {
		req.Prefix = strings.Fields(*prefix)
	}
	c := connect(*sock)
	defer c.Close()
	if err := c.Approve(context.Background(), fs.Arg(0), req); err != nil {
		return apiFail(stderr, "approve", err, "")
	}
	fmt.Fprintf(stdout, "approved %s\n", fs.Arg(0))
	return 0
}

func cmdDeny(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("deny", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	name := fs.String("name", "", "who denies, recorded in the audit stream")
	why := fs.String("reason", "", "why, recorded and shown to the agent")
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: moat deny [--reason TEXT] ID")
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	if err := c.Deny(context.Background(), fs.Arg(0), &client.DenyRequest{Name: *name, Why: *why}); err != nil {
		return apiFail(stderr, "deny", err, "")
	}
	fmt.Fprintf(stdout, "denied %s\n", fs.Arg(0))
	return 0
}
