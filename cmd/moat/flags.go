package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// runFlags are the flags of `moat run` (and `moat policy show`).
type runFlags struct {
	name string
	fs   *flag.FlagSet
	// parseErr is why parse refused the command line.
	parseErr error
	// o holds the flags that change the policy; policy.Overrides.Apply
	// owns what they may change and how their values are read.
	o             policy.Overrides
	policyFile    string
	auditFile     string
	showOnly      bool // moat policy show: an untrusted .moat.toml may be shown, never run
	session       string
	jsonOut       bool
	reportFile    string
	allowDegraded bool
	learn         bool
	auditRate     float64
	auditBurst    int
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// valueFlag records a flag's raw value in an Overrides field, and that
// it was given in Overrides.Given; Apply parses it with the policy's own
// parsers, so flags and files accept the same spellings, and refuses an
// empty value as it refuses any other it cannot take, saying what the
// flag allows (Overrides reads "" alone as "not given").
type valueFlag struct {
	dst   *string
	name  string // the Overrides JSON name: the flag without dashes
	given map[string]bool
}

func (v valueFlag) String() string { return "" }
func (v valueFlag) Set(s string) error {
	if s == "--" {
		return errDashDash
	}
	// --net allow:A --net allow:B allows both, as a repeated list flag
	// does; any other repetition is the last one's.
	if prev, ok := strings.CutPrefix(*v.dst, "allow:"); ok && v.name == "net" && v.given[v.name] {
		if more, ok := strings.CutPrefix(s, "allow:"); ok && prev != "" && more != "" {
			s = "allow:" + prev + "," + more
		}
	}
	*v.dst = s
	v.given[v.name] = true
	return nil
}

// errDashDash refuses "--" as a flag's value: it is where the flags end
// and the command begins, so the flag before it was given no value (moat
// run --policy -- make would read a policy file named "--").
var errDashDash = errors.New("needs a value (it took \"--\", the end of moat's flags, for it); give the flag its value, or leave the flag out")

// nonEmptyFlag is a flag of moat's own (not an Overrides one) whose value
// names something: an empty value would quietly mean the flag was not
// given, so it is refused, saying what the flag wants.
type nonEmptyFlag struct {
	dst  *string
	want string
}

func (v nonEmptyFlag) String() string { return "" }
func (v nonEmptyFlag) Set(s string) error {
	if s == "--" {
		return errDashDash
	}
	if s == "" {
		return fmt.Errorf("empty value; want %s", v.want)
	}
	*v.dst = s
	return nil
}

// policyFlag is --policy: one file, given once. A second does not add to
// the first (the last one given would be the only one read): a wrapper
// adding its own --policy would drop the rules of the person's.
type policyFlag struct{ dst *string }

func (v policyFlag) String() string {
	if v.dst == nil {
		return "" // the zero value flag.PrintDefaults makes
	}
	return *v.dst
}
func (v policyFlag) Set(s string) error {
	switch {
	case s == "--":
		return errDashDash
	case s == "":
		return fmt.Errorf("empty value; want a policy FILE")
	case *v.dst != "":
		return fmt.Errorf("given twice (%s, then %s): moat reads one policy file, and a second does not add to the first; merge them into one", *v.dst, s)
	}
	*v.dst = s
	return nil
}

// limitFlags are the limit and identity flags, with what each accepts,
// for help.
func limitFlags(o *policy.Overrides) []struct {
	flag, help string
	dst        *string
} {
	return []struct {
		flag, help string
		dst        *string
	}{
		{"wall", "wall-clock limit, a `DURATION` (e.g. 90s, 10m, or plain seconds)", &o.Wall},
		{"cpu-time", "CPU-time limit per process, a `DURATION` (RLIMIT_CPU; e.g. 2s, 5m)", &o.CPUTime},
		{"memory", "memory limit of the whole sandbox, a `SIZE` (cgroup; e.g. 512M, 2GiB)", &o.Memory},
		{"pids", "the maximum number of processes and threads, `N` (cgroup; RLIMIT_NPROC without one)", &o.Pids},
		{"cpus", "CPU quota in `CPUS` (cgroup; e.g. 0.5, 2)", &o.CPUs},
		{"open-files", "the maximum number of open files per process, `N` (RLIMIT_NOFILE)", &o.OpenFiles},
		{"file-size", "maximum `SIZE` of a written file (RLIMIT_FSIZE; e.g. 1G)", &o.FileSize},
		{"output", "maximum `SIZE` of stdout+stderr together (e.g. 16M)", &o.Output},
		{"disk", "maximum `SIZE` the run may write to /tmp, home, /dev/shm and an overlay workspace together (e.g. 4G)", &o.Disk},
		{"uid", "`UID` of the command inside the sandbox (not 0)", &o.UID},
	}
}

// volumeFlag is Docker's -v SRC[:DST[:ro|rw]], which is --rw SRC, or
// --ro SRC with ro. moat mounts a path at its own place, so DST, when
// given, must be SRC; SRC:ro and SRC:rw leave it out.
type volumeFlag struct{ f *runFlags }

func (v volumeFlag) String() string { return "" }

func (v volumeFlag) Set(s string) error {
	parts := strings.Split(s, ":")
	if len(parts) > 3 || parts[0] == "" {
		return fmt.Errorf("%q is not SRC[:DST[:ro|rw]]", s)
	}
	src, err := filepath.Abs(parts[0])
	if err != nil {
		return err
	}
	if len(parts) == 2 && (parts[1] == "ro" || parts[1] == "rw") {
		// SRC:ro, the short form moat run --help shows.
		parts = []string{parts[0], parts[0], parts[1]}
	}
	if len(parts) >= 2 && filepath.Clean(parts[1]) != src {
		return fmt.Errorf("%q: moat mounts a host path at its own place inside the sandbox, so the destination must be %s (or leave it out: -v %s)", s, src, parts[0])
	}
	mode := "rw"
	if len(parts) == 3 {
		mode = parts[2]
	}
	switch mode {
	case "ro":
		v.f.o.ReadOnlyPaths = append(v.f.o.ReadOnlyPaths, parts[0])
	case "rw":
		v.f.o.ReadWritePaths = append(v.f.o.ReadWritePaths, parts[0])
	default:
		return fmt.Errorf("%q: mode %q is not ro or rw (the only volume options moat has)", s, mode)
	}
	return nil
}

// ignoredFlag is a Docker flag that means what moat does anyway.
type ignoredFlag struct{}

func (ignoredFlag) String() string   { return "" }
func (ignoredFlag) Set(string) error { return nil }
func (ignoredFlag) IsBoolFlag() bool { return true }

// flagGroups order `moat run --help`. Each entry is a flag's name, with
// its other spellings (Docker's) after a comma.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Policy and files", []string{"policy", "workspace", "workspace-mode", "session", "ro", "rw", "deny", "env,e"}},
	{"Network", []string{"net,network", "tcp-bind", "tcp-connect"}},
	{"Limits and identity", []string{"wall", "cpu-time", "memory,m", "pids,pids-limit", "cpus", "open-files", "file-size", "output", "disk", "uid"}},
	{"Enforcement", []string{"isolation", "landlock", "seccomp", "allow-degraded", "learn"}},
	{"Report", []string{"json", "report", "audit", "audit-burst", "audit-rate"}},
	{"Docker's spellings (see also -e, -m, --network, --pids-limit above)", []string{"volume,v", "workdir,w", "user,u", "read-only", "rm,i,t,it,ti,interactive,tty"}},
}

// flagDefaults are the defaults help shows, where the flag's zero value
// does not say it (they come from the built-in policy).
func flagDefaults() map[string]string {
	d := policy.Default()
	return map[string]string{
		"workspace":      "the current directory",
		"workspace-mode": d.Workspace.Mode,
		"net":            d.Network.Mode,
		"wall":           d.Limits.Wall.String(),
		"cpu-time":       d.Limits.CPU.String(),
		"memory":         "no limit",
		"pids":           "no limit",
		"cpus":           "no limit",
		"disk":           "no limit",
		"open-files":     strconv.FormatInt(d.Limits.OpenFiles, 10),
		"file-size":      d.Limits.FileSize.String(),
		"output":         d.Limits.Output.String(),
		"uid":            strconv.Itoa(d.User.UID),
		"landlock":       d.Filesystem.Landlock,
		"seccomp":        d.Syscalls.Profile,
		"isolation":      d.Sandbox.Isolation,
		"audit-burst":    strconv.Itoa(sandbox.RunAuditBurst),
		"audit-rate":     strconv.Itoa(sandbox.RunAuditRate),
	}
}

func newRunFlags(name string) *runFlags {
	f := &runFlags{name: name}
	o := &f.o
	o.Given = map[string]bool{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Errors and help are printed by parse, in GNU style.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// str is a flag setting an Overrides field: see valueFlag.
	str := func(dst *string, name, usage string) { fs.Var(valueFlag{dst, name, o.Given}, name, usage) }
	fs.Var(policyFlag{&f.policyFile}, "policy", "policy `FILE` (TOML, or JSON by its .json name); default: WORKSPACE/.moat.toml if present and trusted (moat trust), else the built-in policy")
	str(&o.Workspace, "workspace", "the writable workspace `DIR`")
	str(&o.WorkspaceMode, "workspace-mode", "workspace `MODE`: direct, readonly, overlay (changes kept for moat diff / apply) or copy (overlay on a full copy)")
	fs.Var(nonEmptyFlag{&f.session, "a session NAME"}, "session", "overlay/copy mode: reuse the change set of session `NAME`, so runs accumulate")
	fs.Var((*listFlag)(&o.ReadOnlyPaths), "ro", "extra read-only `PATH`, a directory or a file (repeatable)")
	fs.Var((*listFlag)(&o.ReadWritePaths), "rw", "extra read-write `PATH`, a directory or a file; not / nor one holding your home (repeatable)")
	fs.Var((*listFlag)(&o.DenyPaths), "deny", "`PATH` hidden inside the sandbox (repeatable)")
	fs.Var((*listFlag)(&o.Env), "env", "pass variable `NAME` through, or set NAME=VALUE (repeatable)")
	str(&o.Net, "net", "network `MODE`: none (loopback only), allow:HOST,*.DOMAIN,HOST:PORT,SERVICE (only those, through moat's proxy), or host (unfiltered)")
	str(&o.TCPBind, "tcp-bind", "only these TCP `PORTS` may be listened on (comma-separated, 0 = ephemeral, or none), enforced by Landlock")
	str(&o.TCPConnect, "tcp-connect", "only these TCP `PORTS` may be connected to (comma-separated, or none), enforced by Landlock")
	str(&o.Landlock, "landlock", "Landlock `MODE`: auto, required, best-effort or off")
	fs.Var(nonEmptyFlag{&f.auditFile, "a FILE"}, "audit", "append the rules' decision, every network decision, refused system call and the run's outcome to `FILE` as hash-chained JSON lines (moat audit verify checks them)")
	fs.IntVar(&f.auditBurst, "audit-burst", sandbox.RunAuditBurst, "`N` records written to --audit at once before --audit-rate holds; network records and the decisions --learn let through beyond it are counted, not written")
	fs.Float64Var(&f.auditRate, "audit-rate", sandbox.RunAuditRate, "`N` records a second written to --audit once its burst is spent (the rules' decisions are never dropped: the command waits for them to be written)")
	str(&o.Isolation, "isolation", "what isolates the command, `KIND`: native (namespaces, seccomp, Landlock on the host's kernel) or gvisor (gVisor's user-space kernel, runsc; needs root)")
	str(&o.Seccomp, "seccomp", "system-call filter: default, strict, unconfined (no filter), or a Docker-format JSON `PROFILE`")
	fs.BoolVar(&f.jsonOut, "json", false, "print the run report as one JSON object on the last line of stdout")
	fs.Var(nonEmptyFlag{&f.reportFile, "a FILE"}, "report", "write the run report as JSON to `FILE`")
	fs.BoolVar(&f.allowDegraded, "allow-degraded", false, "run even when a limit the policy asks for cannot be enforced here (the report lists what was not)")
	fs.BoolVar(&f.learn, "learn", false, "run the rules in report-only mode: what they would deny or ask about runs, and is audited (with --audit) for moat policy suggest; the sandbox is unchanged")
	for _, lf := range limitFlags(o) {
		str(lf.dst, lf.flag, lf.help)
	}
	fs.Var(volumeFlag{f}, "volume", "the host path `SRC[:SRC][:ro|rw]` read-write (--rw SRC), or read-only with :ro (--ro SRC); a path is mounted at its own place, so a destination must be SRC")
	str(&o.Workdir, "workdir", "working `DIR` of the command, inside the workspace (default: the current directory when inside it, else the workspace)")
	str(&o.User, "user", "`UID[:GID]` of the command inside the sandbox, numbers only (not 0): --uid, and the gid")
	fs.BoolVar(&o.ReadOnly, "read-only", false, "--workspace-mode readonly")
	fs.Var(ignoredFlag{}, "rm", "accepted and ignored: a run leaves no container behind, stdin is always passed, and a terminal on stdin gets a pty")
	for _, g := range flagGroups {
		for _, spellings := range g.flags {
			names := strings.Split(spellings, ",")
			orig := fs.Lookup(names[0])
			for _, alias := range names[1:] {
				fs.Var(orig.Value, alias, orig.Usage)
			}
		}
	}
	f.fs = fs
	return f
}

// flagSpelling spells a flag name as typed on a command line: -e, -it,
// --env.
func flagSpelling(name string) string {
	if len(name) == 1 || name == "it" || name == "ti" {
		return "-" + name
	}
	return "--" + name
}

// parse parses args. On a mistake it prints one line, naming the closest
// flag for an unknown one, and returns false with moat's exit status; on
// --help it prints the help to stdout and returns false with 0.
func (f *runFlags) parse(args []string, stdout, stderr io.Writer) (ok bool, code int) {
	err := f.fs.Parse(args)
	if err == nil && f.showOnly {
		// The run's outputs: a policy shown or explained has no run.
		for _, name := range []string{"json", "report", "audit", "audit-burst", "audit-rate"} {
			if f.given(name) {
				fmt.Fprintf(stderr, "moat: --%s is moat run's: moat %s runs nothing\n", name, f.name)
				return false, 2
			}
		}
	}
	if err == nil {
		return true, 0
	}
	if errors.Is(err, flag.ErrHelp) {
		f.printHelp(stdout)
		return false, 0
	}
	f.parseErr = fmt.Errorf("%s; see moat %s --help", flagErrorMessage(f.fs, err), f.name)
	fmt.Fprintf(stderr, "moat: %v\n", f.parseErr)
	return false, exitMoatError
}

// auditBounds checks --audit-rate and --audit-burst, which bound the
// --audit stream and need it.
func (f *runFlags) auditBounds() error {
	for _, name := range []string{"audit-burst", "audit-rate"} {
		if f.given(name) && f.auditFile == "" {
			return fmt.Errorf("--%s bounds the --audit stream: give --audit FILE too", name)
		}
	}
	if f.auditBurst <= 0 {
		return fmt.Errorf("--audit-burst %d: want a number of records, 1 or more", f.auditBurst)
	}
	if !(f.auditRate >= 0.001) || math.IsInf(f.auditRate, 1) {
		return fmt.Errorf("--audit-rate %v: want a number of records a second, 0.001 or more", f.auditRate)
	}
	return nil
}

// given says whether the flag name was on the command line.
func (f *runFlags) given(name string) bool {
	seen := false
	f.fs.Visit(func(fl *flag.Flag) { seen = seen || fl.Name == name })
	return seen
}

// flagErrorMessage says what was wrong in the words of moat's flags
// (--name, "needs a value", the closest known flag to an unknown one)
// rather than those of package flag.
func flagErrorMessage(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		msg = "unknown flag " + flagSpelling(name)
		if near := closestFlag(fs, name); near != "" {
			msg += " (did you mean " + flagSpelling(near) + "?)"
		}
	} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		msg = "flag " + flagSpelling(name) + " needs a value"
	} else {
		// "invalid value V for flag -NAME: ...", "... for -NAME: ..."
		for _, at := range []string{"for flag -", "for -"} {
			if before, after, ok := strings.Cut(msg, at); ok {
				name, why, _ := strings.Cut(after, ": ")
				msg = before + "for " + flagSpelling(name) + ": " + why
				break
			}
		}
	}
	return msg
}

// closestFlag is the flag of fs nearest to name, or "" when none is near
// enough to be what was meant.
func closestFlag(fs *flag.FlagSet, name string) string {
	var known []string
	fs.VisitAll(func(fl *flag.Flag) { known = append(known, fl.Name) })
	return policy.ClosestOption(name, known)
}

// parseFlags parses the flags of a command other than run (fs named as
// the command is, "session create"), flags first. A mistake is one line
// on stderr, as run's are, and false with status 2; --help prints the
// command's usage to stderr and false with status 0.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (ok bool, code int) {
	return parseFlagsWith(fs, stderr, func() error { return fs.Parse(args) })
}

// parseFlagsInterspersed is parseFlags for a command whose flags may
// come after its positional arguments (moat diff ID --stat).
func parseFlagsInterspersed(fs *flag.FlagSet, args []string, stderr io.Writer) (ok bool, code int) {
	return parseFlagsWith(fs, stderr, func() error { return parseInterspersed(fs, args) })
}

func parseFlagsWith(fs *flag.FlagSet, stderr io.Writer, parse func() error) (bool, int) {
	usage := fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := parse()
	fs.SetOutput(stderr)
	fs.Usage = usage
	switch {
	case err == nil:
		return true, 0
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			fmt.Fprintf(stderr, "Usage of moat %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return false, 0
	}
	fmt.Fprintf(stderr, "moat %s: %s; see moat %s --help\n", fs.Name(), flagErrorMessage(fs, err), fs.Name())
	return false, 2
}

// printHelp prints the flags in GNU style (--flag VALUE), by group, each
// with its other spellings and its default.
func (f *runFlags) printHelp(w io.Writer) {
	head := "moat " + f.name + " [flags]"
	if f.name == "run" || f.name == "policy explain" {
		head += " -- CMD [ARGS...]"
	}
	fmt.Fprintf(w, "Usage: %s\n", head)
	defaults := flagDefaults()
	for _, g := range flagGroups {
		if f.showOnly && g.title == "Report" {
			continue // the run's outputs, which parse refuses here
		}
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, spellings := range g.flags {
			names := strings.Split(spellings, ",")
			fl := f.fs.Lookup(names[0])
			arg, usage := flag.UnquoteUsage(fl)
			if _, isBool := fl.Value.(interface{ IsBoolFlag() bool }); isBool {
				arg = ""
			}
			// Short spellings first, as GNU help has them.
			var short, long []string
			for _, n := range names {
				if sp := flagSpelling(n); !strings.HasPrefix(sp, "--") {
					short = append(short, sp)
				} else {
					long = append(long, flagSpelling(n))
				}
			}
			spelled := append(short, long...)
			line := "  " + strings.Join(spelled, ", ")
			if arg != "" {
				line += " " + arg
			}
			if d, ok := defaults[names[0]]; ok {
				usage += " (default: " + d + ")"
			}
			fmt.Fprintf(w, "%s\n      %s\n", line, usage)
		}
	}
}

// caller is who runs the command, with -w, when given, as its working
// directory (policy.Overrides.WorkDir keeps it inside the workspace). nil
// means sandbox.CurrentCaller.
func (f *runFlags) caller(p *policy.Policy) (*sandbox.Caller, error) {
	dir, err := f.o.WorkDir(p)
	if err != nil || dir == "" {
		return nil, err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("flag -w %s: not a directory of the workspace", f.o.Workdir)
	}
	c := sandbox.CurrentCaller()
	c.Cwd = dir
	return &c, nil
}

// emptyFlag reports the first of names given on the command line with an
// empty value, as an error saying what the flag takes: for these flags ""
// is their default, "not given", so `--tenant-memory=` would otherwise
// quietly set no bound at all.
func emptyFlag(fs *flag.FlagSet, names ...string) error {
	var err error
	fs.Visit(func(fl *flag.Flag) {
		if err == nil && fl.Value.String() == "" && slices.Contains(names, fl.Name) {
			err = fmt.Errorf("--%s: empty value; give one (%s), or leave the flag out for its default", fl.Name, fl.Usage)
		}
	})
	return err
}

// flagSet says whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// policyWorkspace is the workspace a policy file names (workspace.path,
// relative to the file's directory), for a command whose --workspace
// was not given: the session's workspace is the request's, and a policy
// written for moat run names its own. def when it names none or cannot
// be read (the daemon then reports the policy's errors).
func policyWorkspace(file string, doc []byte, def string) string {
	p, err := policy.ParseDocument(file, doc)
	if err != nil || p.Workspace.Path == policy.Default().Workspace.Path {
		return def
	}
	if filepath.IsAbs(p.Workspace.Path) {
		return p.Workspace.Path
	}
	return filepath.Join(filepath.Dir(file), p.Workspace.Path)
}

// operands reads the arguments of a command that takes no flags, only
// operands (files, a URL), as parseFlags reads a command's flags: -h or
// --help prints its usage line to stderr (status 0); an argument that
// looks like a flag is refused as one rather than taken for a file
// (status 2; "--" ends them, for a file whose name starts with "-"; "-"
// alone is an operand); and so is a count of operands outside [least,
// most] (most < 0: no bound). ok false: return code.
func operands(name, usage string, args []string, least, most int, stderr io.Writer) (ops []string, ok bool, code int) {
	for i, a := range args {
		if a == "--" {
			ops = append(ops, args[i+1:]...)
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprintln(stderr, usage)
			return nil, false, 0
		}
		if len(a) > 1 && a[0] == '-' {
			fmt.Fprintf(stderr, "moat %s: unknown flag %s (it takes none); see moat %s --help\n", name, a, name)
			return nil, false, 2
		}
		ops = append(ops, a)
	}
	if len(ops) < least || most >= 0 && len(ops) > most {
		fmt.Fprintln(stderr, usage)
		return nil, false, 2
	}
	return ops, true, 0
}

// durationFlag is fs.Duration whose mistakes say what a duration is,
// where package flag's say "parse error".
func durationFlag(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	d := value
	fs.Var((*durationValue)(&d), name, usage)
	return &d
}

type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, perr := policy.ParseDuration(s); errors.Is(perr, policy.ErrDurationTooLong) {
			return errors.Unwrap(perr)
		}
		return errors.New(`want a duration such as "90s", "15m" or "2h"`)
	}
	*d = durationValue(v)
	return nil
}
