package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// The review commands of the copy-on-write workspace: moat runs, diff,
// apply and discard. Wherever they take an ID, a session name works too;
// without one they use the most recently used change set of the current
// directory's workspace.

// pickChangeSet opens the change set named by id, or the latest one of
// the workspace that contains the current directory.
func pickChangeSet(id string) (*workspace.ChangeSet, error) {
	if id != "" {
		cs, err := workspace.Open(id)
		if errors.Is(err, workspace.ErrNotFound) {
			return nil, fmt.Errorf("no change set or session named %q (see moat runs)", id)
		}
		return cs, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real
	}
	infos, err := workspace.List()
	if err != nil {
		return nil, err
	}
	var best *workspace.Info
	for i := range infos {
		in := &infos[i]
		rel, err := filepath.Rel(in.Workspace, cwd)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if best == nil || in.LastUsed.After(best.LastUsed) {
			best = in
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no change set for %s (run with --workspace-mode overlay first, or name one: see moat runs)", cwd)
	}
	return workspace.Open(best.ID)
}

func cmdRuns(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the change sets as JSON")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	infos, err := workspace.List()
	if err != nil {
		printErr(stderr, "runs", err)
		return exitMoatError
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].LastUsed.After(infos[j].LastUsed) })
	if *asJSON {
		b, _ := json.Marshal(infos)
		b = workspace.JSONControls(b)
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	if len(infos) == 0 {
		fmt.Fprintln(stdout, "no kept change sets")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSESSION\tWORKSPACE\tSIZE\tAGE\tRUNS\tLAST COMMAND")
	for _, in := range infos {
		last := ""
		if n := len(in.Commands); n > 0 {
			// Escaped before it is cut, so that the cut never splits a
			// character into a stray byte.
			last = workspace.EscapeText(strings.Join(in.Commands[n-1].Args, " "))
			if r := []rune(last); len(r) > 40 {
				last = string(r[:37]) + "..."
			}
		}
		pending := ""
		if in.PendingApply {
			pending = " (apply interrupted)"
		}
		if in.Incomplete {
			pending = " (copying the workspace)"
		}
		if in.Merging {
			pending = " (saving a run's changes, or interrupted doing so: see moat diff)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s%s\n", in.ID, dash(in.Session), workspace.QuoteName(in.Workspace),
			humanBytes(in.Size), age(in.LastUsed), len(in.Commands), last, pending)
	}
	tw.Flush()
	return 0
}

func cmdDiff(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stat := fs.Bool("stat", false, "summary only: one line per change")
	format := fs.String("format", "unified", "unified, summary, patch (for git apply) or json")
	asJSON := fs.Bool("json", false, "same as --format json")
	var exclude listFlag
	fs.Var(&exclude, "exclude", "leave out paths matching `GLOB` (repeatable)")
	all := fs.Bool("all", false, "expand node_modules/, __pycache__/, .venv/ instead of summarising them")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: moat diff [flags] [ID|SESSION]")
		fs.PrintDefaults()
	}
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return 2
	}
	f := workspace.Format(*format)
	if *stat {
		f = workspace.Summary
	}
	if *asJSON {
		f = workspace.JSON
	}
	switch f {
	case workspace.Summary, workspace.Unified, workspace.Patch, workspace.JSON:
	default:
		fmt.Fprintf(stderr, "moat diff: --format %q is not one of unified, summary, patch, json\n", *format)
		return 2
	}
	cs, err := pickChangeSet(fs.Arg(0))
	if err != nil {
		printErr(stderr, "diff", err)
		return exitMoatError
	}
	// Whether a run or session holds it is asked before its changes are
	// read: one that ends in between was still in use for this review.
	inUse := cs.InUse()
	changes, err := cs.Changes()
	if err != nil {
		printErr(stderr, "diff", err)
		return exitMoatError
	}
	opts := workspace.DiffOptions{Format: f, Filter: workspace.Filter{Exclude: exclude}}
	if *all {
		opts.Filter.Collapse = []string{}
	}
	if err := cs.WriteDiff(stdout, changes, opts); err != nil {
		printErr(stderr, "diff", err)
		return exitMoatError
	}
	if f == workspace.Patch || f == workspace.JSON {
		// The summary and the unified diff say it in their text.
		if note := workspace.ExcludedNote(opts.Filter.Excluded(changes)); note != "" {
			fmt.Fprintf(stderr, "moat diff: note: %s\n", note)
		}
	}
	if f == workspace.Patch {
		// A patch carries only what git applies: what moat apply would
		// also do (a mode such as 0666) is said beside it.
		for _, n := range workspace.PatchNotes(changes) {
			fmt.Fprintf(stderr, "moat diff: note: %s\n", n)
		}
		// git apply takes what moat apply refuses without --force.
		if rep, _ := cs.Preview(nil, nil); len(rep.Protected) > 0 {
			fmt.Fprintf(stderr, "moat diff: warning: the patch changes %d protected path(s), which host tools run or read (%s): git apply would write them, where moat apply refuses them unless --force names each\n",
				len(rep.Protected), workspace.EscapeText(firstOf(rep.Protected, maxListed)))
		}
	}
	if err := cs.NoteReview(inUse); err != nil {
		printErr(stderr, "diff", err)
		return exitMoatError
	}
	if inUse {
		fmt.Fprintf(stderr, "moat diff: warning: change set %s is in use by a run or session, which may change it after this review: moat apply refuses it until you diff it again once that has ended\n", cs.ID())
	}
	return 0
}

func cmdApply(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var force listFlag
	fs.Var(&force, "force", "apply `PATH` even though the real file changed since the run, or is a protected path (repeatable)")
	keep := fs.Bool("keep", false, "keep the change set after applying it (default: discard it once everything is applied)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: moat apply [flags] [ID|SESSION] [PATHS...]")
		fs.PrintDefaults()
	}
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	rest := fs.Args()
	id := ""
	// The first argument is a change set when one has that ID or session
	// name, else the first path of the latest change set of the current
	// directory's workspace. Named neither, it is most likely a change set
	// that does not exist (a typo, one applied or discarded already), and
	// is refused as such rather than as a path.
	named := ""
	if len(rest) > 0 {
		_, err := workspace.Open(rest[0])
		switch {
		case err == nil:
			id, rest = rest[0], rest[1:]
		case errors.Is(err, workspace.ErrNotFound):
			named = rest[0]
		default:
			printErr(stderr, "apply", err)
			return exitMoatError
		}
	}
	cs, err := pickChangeSet(id)
	if err != nil {
		if named != "" {
			err = fmt.Errorf("no change set or session named %q (see moat runs), and no change set of this directory's workspace it could be a path of", named)
		}
		printErr(stderr, "apply", err)
		return exitMoatError
	}
	var paths []string
	if len(rest) > 0 {
		paths = rest
	}
	// An apply stops as a whole or not at all (a journal rolls back or
	// finishes one cut short): Ctrl-C, SIGTERM or SIGHUP while it runs
	// are held until it is done, rather than leave the workspace half
	// applied until the next apply or discard.
	held := make(chan os.Signal, 1)
	signal.Notify(held, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	rep, err := cs.Apply(paths, force)
	signal.Stop(held)
	select {
	case s := <-held:
		fmt.Fprintf(stderr, "moat apply: %s came while applying; the apply ran to its end first (it stops only as a whole)\n", sandbox.SignalName(s.(syscall.Signal)))
	default:
	}
	for _, r := range rep.Recovered {
		fmt.Fprintf(stderr, "moat apply: %s\n", r)
	}
	var nc *workspace.NoChangeError
	if named != "" && errors.As(err, &nc) && nc.Path == named {
		printErr(stderr, "apply", fmt.Errorf("no change set or session named %q (see moat runs), nor a change at that path in %s, the latest change set of this directory's workspace", named, cs.ID()))
		return exitMoatError
	}
	if errors.Is(err, workspace.ErrProtected) {
		fmt.Fprintln(stderr, "moat apply: nothing applied: the change set touches files that tools run later on the host:")
		for _, p := range rep.Protected {
			fmt.Fprintf(stderr, "  %s\n", workspace.QuoteName(p))
		}
		fmt.Fprintln(stderr, "review them with `moat diff`, then apply with --force PATH for each you accept")
		return 1
	}
	// Names are the command's and a reason may quote one: both are
	// quoted or escaped so that they cannot rewrite the lines around them.
	for _, c := range rep.Applied {
		fmt.Fprintf(stdout, "%-8s %s\n", c.Kind, workspace.QuoteName(c.Path))
	}
	for _, c := range rep.Forced {
		fmt.Fprintf(stderr, "moat apply: forced over a host change: %s (%s)\n", workspace.QuoteName(c.Path), workspace.EscapeText(c.Reason))
	}
	if err == nil {
		for _, p := range rep.ProtectedForced {
			fmt.Fprintf(stderr, "moat apply: forced a protected path, which host tools run or read: %s\n", workspace.QuoteName(p))
		}
	}
	for _, c := range rep.Skipped {
		fmt.Fprintf(stderr, "moat apply: skipped special file %s\n", workspace.QuoteName(c.Path))
	}
	if errors.Is(err, workspace.ErrReplaced) {
		printErr(stderr, "apply", err)
		return 1
	}
	if errors.Is(err, workspace.ErrConflict) {
		fmt.Fprintln(stderr, "moat apply: nothing applied: these files changed on the host since the change set was made:")
		for _, c := range rep.Conflicts {
			fmt.Fprintf(stderr, "  %s: %s\n", workspace.QuoteName(c.Path), workspace.EscapeText(c.Reason))
		}
		fmt.Fprintln(stderr, "review them, then apply with --force PATH for each to overwrite")
		return 1
	}
	if err != nil {
		printErr(stderr, "apply", err)
		return exitMoatError
	}
	if paths == nil && !*keep {
		if err := cs.Discard(); err != nil {
			fmt.Fprintf(stderr, "moat apply: applied, but could not discard the change set: %s\n", workspace.EscapeText(err.Error()))
			return exitMoatError
		}
	}
	return 0
}

func cmdDiscard(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("discard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: moat discard [ID|SESSION]: remove a kept change set (the latest of this directory's workspace without one) without applying it")
	}
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "Usage: moat discard [ID|SESSION]")
		return 2
	}
	cs, err := pickChangeSet(fs.Arg(0))
	if err != nil {
		printErr(stderr, "discard", err)
		return exitMoatError
	}
	id := cs.ID()
	if err := cs.Discard(); err != nil {
		printErr(stderr, "discard", err)
		return exitMoatError
	}
	fmt.Fprintf(stdout, "discarded %s\n", id)
	return 0
}

// parseInterspersed parses flags that may come after positional
// arguments (moat diff ID --stat).
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// printErr prints a command's error for a person: its text may quote a
// name from the change set.
func printErr(w io.Writer, cmd string, err error) {
	fmt.Fprintf(w, "moat %s: %s\n", cmd, workspace.EscapeMessage(err.Error()))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
