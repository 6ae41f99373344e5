// Command moat runs a command inside a kernel-enforced sandbox.
//
//	moat run [flags] -- CMD [ARGS...]   run CMD under the policy
//	moat doctor                         what this host can enforce
//	moat policy show [flags]            the effective policy, as TOML
//
// It is thin: flags become a policy, the policy a run, the run a report.
// Before anything else it checks whether it was re-executed as a
// sandbox's init stage.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/policy"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitMoatError is moat's own failure, as with `docker run`.
const exitMoatError = 125

func main() {
	native.RestoreTimerSlack() // this thread's timer slack, raised by the entry point
	native.MaybeInit()
	gvisor.MaybeForward()
	growStack()
	exitAfterRun = true
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// exitAfterRun is set when this process exits once the command is done
// (not in tests that call realMain in-process): the sandbox's last
// teardown is then left to end with it (sandbox.Request.ExitAfter).
var exitAfterRun bool

// growStack gives the main goroutine a stack big enough for a run at once.
// A goroutine starts with a few KiB and doubles on demand, copying its
// stack and walking every frame's tables each time. One frame of 32 KiB
// makes the runtime allocate a 64 KiB stack while the stack is still
// shallow: 8 stack copies per run became 5, −0.05 ms [−0.08, −0.01]
// (bench/abtime). 64 KiB saved fewer copies and gained less: zeroing the
// frame touches its pages. The frame is handed to keep, which the compiler
// cannot see through: the first version of this function indexed a local
// array, which the compiler removed altogether, so it did nothing.
//
//go:noinline
func growStack() byte {
	var frame [32 << 10]byte
	return keep(&frame)
}

//go:noinline
func keep(f *[32 << 10]byte) byte { return f[len(f)-1] }

const usage = `moat runs a command inside a kernel-enforced sandbox.

Usage:
  moat run [flags] -- CMD [ARGS...]   run CMD (default policy: workspace = current directory, no network)
  moat diff [ID] [--stat|--format F]  review the changes of an overlay run (a session name works as ID)
  moat apply [ID] [PATHS...]          copy reviewed changes into the real workspace, atomically
  moat discard [ID]                   throw a change set away
  moat runs                           list kept change sets (alias: moat sessions)
  moat trust [FILE]                   trust this workspace's .moat.toml and the files it loads (after reviewing them)
  moat doctor                         show which protections this host can enforce
  moat policy show [flags]            print the effective policy as TOML
  moat policy explain [flags] -- CMD  say which rule decides about CMD, and why
  moat policy check FILE...           validate policies and run their rules' examples
  moat policy suggest AUDIT.jsonl     propose policy additions from an audit stream (moat run --learn)
  moat audit verify FILE              check an audit stream's hash chain
  moat fetch URL                      GET a public HTTPS URL: no redirects, 5 s, 1 MiB, no private addresses
  moat seccomp check FILE             validate a Docker-format seccomp profile and summarise it
  moat serve [--socket P] [--listen ADDR --tokens F]  the session daemon (HTTP API: docs/openapi.yaml)
  moat session create [--policy F] [--workspace DIR|--temp] [--ttl D]  start a session, print its id
  moat session ls | rm ID...          list or end your sessions
  moat exec [-i] [-d] SESSION -- CMD  run CMD in a session, output streamed (-d: in the background)
  moat ps SESSION                     a session's background commands
  moat logs [-f] SESSION ID           what a background command wrote (-f: follow it to its end)
  moat kill [-s SIGNAL] SESSION ID    signal a background command (TERM unless -s names another)
  moat cp SRC DST                     copy a file to or from a session (SESSION:PATH)
  moat mcp [--policy F] [--workspace DIR] [--workspace-mode M]  an MCP server on stdio for any agent (docs/mcp.md)
  moat approvals [--web]              what waits for your approval in the daemon's sessions (--web: a login link to its page)
  moat approve [--scope S] [--for D] ID  let it run: once, a command prefix or the rule's asks in the session, for D
  moat deny [--reason TEXT] ID        refuse it
  moat version

Run 'moat run --help' for the run flags.
`

// quitAsTerm installs, once, the SIGQUIT handling of realMain.
var quitAsTerm sync.Once

func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] != "run" {
		// A reader of moat's output that goes away (moat apply | head)
		// makes a write fail with EPIPE rather than end moat half way
		// through its work; moat run takes SIGPIPE with its other
		// handlers (see cmdRun).
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
		quitAsTerm.Do(func() {
			// Ctrl-\ (SIGQUIT) would end moat with the Go runtime's dump
			// of its goroutines: it ends moat as SIGTERM does, through
			// the command's own handling of that (moat serve drains,
			// moat exec ends its command). moat run forwards it.
			quit := make(chan os.Signal, 1)
			signal.Notify(quit, syscall.SIGQUIT)
			go func() {
				for range quit {
					syscall.Kill(os.Getpid(), syscall.SIGTERM)
				}
			}()
		})
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdin, stdout, stderr)
	case "doctor":
		return cmdDoctor(args[1:], stdout, stderr)
	case "policy":
		return cmdPolicy(args[1:], stdout, stderr)
	case "seccomp":
		return cmdSeccomp(args[1:], stdout, stderr)
	case "audit":
		return cmdAudit(args[1:], stdout, stderr)
	case "fetch":
		return cmdFetch(args[1:], stdout, stderr)
	case "trust":
		return cmdTrust(args[1:], stdout, stderr)
	case "runs", "sessions":
		return cmdRuns(args[1:], stdout, stderr)
	case "diff":
		return cmdDiff(args[1:], stdout, stderr)
	case "apply":
		return cmdApply(args[1:], stdout, stderr)
	case "discard":
		return cmdDiscard(args[1:], stdout, stderr)
	case "serve":
		return cmdServe(args[1:], stderr)
	case "session":
		return cmdSession(args[1:], stdout, stderr)
	case "exec":
		return cmdExec(args[1:], stdin, stdout, stderr)
	case "ps":
		return cmdPs(args[1:], stdout, stderr)
	case "logs":
		return cmdLogs(args[1:], stdout, stderr)
	case "kill":
		return cmdKill(args[1:], stdout, stderr)
	case "cp":
		return cmdCp(args[1:], stdout, stderr)
	case "mcp":
		return cmdMCP(args[1:], stdin, stdout, stderr)
	case "approvals":
		return cmdApprovals(args[1:], stdout, stderr)
	case "approve":
		return cmdApprove(args[1:], stdout, stderr)
	case "deny":
		return cmdDeny(args[1:], stdout, stderr)
	case "version", "--version":
		if _, ok, code := operands("version", "usage: moat version", args[1:], 0, 0, stderr); !ok {
			return code
		}
		fmt.Fprintln(stdout, "moat", versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	commands := []string{"run", "diff", "apply", "discard", "runs", "trust", "doctor", "policy", "seccomp", "audit", "serve", "session", "exec", "ps", "logs", "kill", "cp", "fetch", "mcp", "approvals", "approve", "deny", "version"}
	near := ""
	if c := policy.ClosestOption(args[0], commands); c != "" {
		near = fmt.Sprintf(", did you mean %s?", c)
	}
	fmt.Fprintf(stderr, "moat: unknown command %q%s (commands: %s)\n", args[0], near, strings.Join(commands, ", "))
	return 2
}

// asksHelp says whether args, the arguments of a command that takes no
// flags, ask for its usage (-h or --help) rather than name a file or URL.
func asksHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

// versionString is the version, with the commit and Go version the binary
// was built from when the build recorded them.
func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", ""
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				rev = st.Value
			case "vcs.modified":
				if st.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			v += " (" + rev + dirty + ")"
		}
		v += " " + bi.GoVersion
	}
	return v
}
