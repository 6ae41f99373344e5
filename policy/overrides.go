package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moatbox/moat/internal/suggest"
)

// Overrides are changes a caller makes to a policy for one run: the flags
// of `moat run`, or the same options of a request to a program that runs
// sandboxes for others. Every caller applies them with [Overrides.Apply],
// so each gets the same rules: which fields an option may change, how its
// value is spelled (the policy file's own parsers: "512M", "1m30s" and
// plain seconds work as in files), and errors that name the option.
//
// An option is named by its `moat run` flag ("--memory"); the JSON names
// are the flags without their dashes. A field left at its zero value ("",
// nil, false) changes nothing. Values are strings where the policy file
// takes a size, a duration or a number, so that a request carries what a
// person typed and its errors read like the CLI's.
//
// Apply checks what an option says, not who may say it: a program that
// takes Overrides from someone else decides which host paths (Workspace,
// ReadOnlyPaths, ReadWritePaths, Workdir) that someone may name.
type Overrides struct {
	// Dir is the directory relative paths in the overrides are relative
	// to: the caller's working directory for the CLI. With Dir unset, a
	// relative path is an error. It is never read from JSON: the program
	// applying a request sets it, not the client.
	Dir string `json:"-"`

	Workspace     string `json:"workspace,omitempty"`      // --workspace: workspace.path
	WorkspaceMode string `json:"workspace-mode,omitempty"` // --workspace-mode: workspace.mode
	// ReadOnly is Docker's --read-only: workspace.mode readonly. It
	// conflicts with any other WorkspaceMode.
	ReadOnly bool `json:"read-only,omitempty"`
	// Workdir is the command's working directory (-w): inside the
	// workspace; see [Overrides.WorkDir].
	Workdir string `json:"workdir,omitempty"`

	ReadOnlyPaths  []string `json:"ro,omitempty"`   // --ro: appended to filesystem.read_only
	ReadWritePaths []string `json:"rw,omitempty"`   // --rw: appended to filesystem.read_write
	DenyPaths      []string `json:"deny,omitempty"` // --deny: appended to filesystem.deny
	// Env entries are NAME (appended to env.pass) or NAME=VALUE (set in
	// env.set).
	Env []string `json:"env,omitempty"`

	// Net is none, host, allow, or allow:HOST,... (the hosts appended to
	// network.allow).
	Net        string `json:"net,omitempty"`
	TCPBind    string `json:"tcp-bind,omitempty"`    // ports separated by commas, or none
	TCPConnect string `json:"tcp-connect,omitempty"` // as TCPBind
	Landlock   string `json:"landlock,omitempty"`    // filesystem.landlock
	Seccomp    string `json:"seccomp,omitempty"`     // syscalls.profile
	Isolation  string `json:"isolation,omitempty"`   // sandbox.isolation

	Wall      string `json:"wall,omitempty"`       // limits.wall, a duration
	CPUTime   string `json:"cpu-time,omitempty"`   // limits.cpu, a duration
	Memory    string `json:"memory,omitempty"`     // limits.memory, a size
	Pids      string `json:"pids,omitempty"`       // limits.pids, a whole number
	CPUs      string `json:"cpus,omitempty"`       // limits.cpus, a number
	OpenFiles string `json:"open-files,omitempty"` // limits.open_files, a whole number
	FileSize  string `json:"file-size,omitempty"`  // limits.file_size, a size
	Output    string `json:"output,omitempty"`     // limits.output, a size
	Disk      string `json:"disk,omitempty"`       // limits.disk, a size
	UID       string `json:"uid,omitempty"`        // user.uid, a whole number
	// User is Docker's --user UID[:GID], numbers only: user.uid and
	// user.gid.
	User string `json:"user,omitempty"`

	// Given names the options given explicitly, by their JSON names
	// ("landlock", "tcp-bind"), whatever their value. An empty value of
	// an option in Given is an error, as any other value it cannot take
	// is, not "not given": `--landlock ''` must not quietly keep the
	// policy's mode. The CLI sets it for every option on its command
	// line; a program decoding JSON may leave it nil.
	Given map[string]bool `json:"-"`
}

// valueOverride is one option whose value is parsed like the policy
// file's, in the order Apply reports their errors.
type valueOverride struct {
	flag, field string
	raw         func(*Overrides) string
	set         func(*Policy, string) (want string, err error)
}

func setDuration(dst func(*Policy) *Duration) func(*Policy, string) (string, error) {
	return func(p *Policy, raw string) (string, error) {
		d, err := ParseDuration(raw)
		if err == nil {
			*dst(p) = d
		}
		return "a duration such as 90s, 1m30s, or plain seconds", err
	}
}

func setSize(dst func(*Policy) *Size) func(*Policy, string) (string, error) {
	return func(p *Policy, raw string) (string, error) {
		s, err := ParseSize(raw)
		if err == nil {
			*dst(p) = s
		}
		return "a size such as 512M, 512MiB, 1G, or bytes", err
	}
}

func setInt(dst func(*Policy, int64)) func(*Policy, string) (string, error) {
	return func(p *Policy, raw string) (string, error) {
		// Spaces around it are ignored, as the size and duration
		// flags ignore them.
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil {
			return "a whole number", errors.Unwrap(err)
		}
		dst(p, n)
		return "", nil
	}
}

// valueOverrides is a function, not a package-level table, so that
// programs linking policy pay for it only when they apply overrides.
func valueOverrides() []valueOverride {
	return []valueOverride{
		{"--wall", "limits.wall", func(o *Overrides) string { return o.Wall }, setDuration(func(p *Policy) *Duration { return &p.Limits.Wall })},
		{"--cpu-time", "limits.cpu", func(o *Overrides) string { return o.CPUTime }, setDuration(func(p *Policy) *Duration { return &p.Limits.CPU })},
		{"--memory", "limits.memory", func(o *Overrides) string { return o.Memory }, setSize(func(p *Policy) *Size { return &p.Limits.Memory })},
		{"--pids", "limits.pids", func(o *Overrides) string { return o.Pids }, setInt(func(p *Policy, n int64) { p.Limits.Pids = n })},
		{"--cpus", "limits.cpus", func(o *Overrides) string { return o.CPUs }, func(p *Policy, raw string) (string, error) {
			const want = "a number of CPUs such as 0.5 or 2, or 0 for no limit"
			x, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
			if err != nil {
				return want, errors.Unwrap(err)
			}
			if x == 0 && nonZeroText(raw) {
				return want, errZeroNumber
			}
			p.Limits.CPUs = x
			return "", nil
		}},
		{"--open-files", "limits.open_files", func(o *Overrides) string { return o.OpenFiles }, setInt(func(p *Policy, n int64) { p.Limits.OpenFiles = n })},
		{"--file-size", "limits.file_size", func(o *Overrides) string { return o.FileSize }, setSize(func(p *Policy) *Size { return &p.Limits.FileSize })},
		{"--output", "limits.output", func(o *Overrides) string { return o.Output }, setSize(func(p *Policy) *Size { return &p.Limits.Output })},
		{"--disk", "limits.disk", func(o *Overrides) string { return o.Disk }, setSize(func(p *Policy) *Size { return &p.Limits.Disk })},
		{"--uid", "user.uid", func(o *Overrides) string { return o.UID }, setInt(func(p *Policy, n int64) { p.User.UID = int(n) })},
	}
}

// Apply changes p as o asks, and marks every field it changes with the
// option that changed it ([Policy.MarkFlag]), so that the errors of
// [Policy.Validate] about such a field name the option. It checks what
// it parses (the spelling of a size, a port list, --user) and returns an
// error naming the option; the limits' ranges and the rest are Validate's
// to check. Call [Policy.Resolve] and [Policy.Validate] after it, as
// after any change; lists are appended to, never replaced, so an override
// cannot drop a path the policy denies or an environment rule it has.
func (o *Overrides) Apply(p *Policy) error {
	// given reports whether the option named (by its JSON name) is to be
	// applied: it has a value, or was given with an empty one, which its
	// parser or Validate then refuses, saying what it allows.
	given := func(name, v string) bool { return v != "" || o.Given[name] }
	abs := func(flag string, list []string) ([]string, error) {
		out := make([]string, len(list))
		for i, v := range list {
			switch {
			case v == "":
				// filepath.Join(o.Dir, "") would name the working
				// directory, which is not what an empty value says.
				return nil, fmt.Errorf("flag %s: empty path; give a PATH", flag)
			case strings.HasPrefix(v, "~/") || filepath.IsAbs(v):
				out[i] = v
			case o.Dir == "":
				return nil, fmt.Errorf("flag %s %q: a relative path needs a base directory (Overrides.Dir)", flag, v)
			default:
				out[i] = filepath.Join(o.Dir, v)
			}
		}
		return out, nil
	}
	if given("workspace", o.Workspace) {
		ws, err := abs("--workspace", []string{o.Workspace})
		if err != nil {
			return err
		}
		p.Workspace.Path = ws[0]
		p.MarkFlag("workspace.path", "--workspace")
	}
	if given("workspace-mode", o.WorkspaceMode) {
		p.Workspace.Mode = o.WorkspaceMode
		p.MarkFlag("workspace.mode", "--workspace-mode")
	}
	if given("landlock", o.Landlock) {
		p.Filesystem.Landlock = o.Landlock
		p.MarkFlag("filesystem.landlock", "--landlock")
	}
	if given("seccomp", o.Seccomp) {
		p.Syscalls.Profile = o.Seccomp
		p.MarkFlag("syscalls.profile", "--seccomp")
	}
	if given("isolation", o.Isolation) {
		p.Sandbox.Isolation = o.Isolation
		p.MarkFlag("sandbox.isolation", "--isolation")
	}
	if given("net", o.Net) {
		mode, list, hasList := strings.Cut(o.Net, ":")
		p.Network.Mode = mode
		p.MarkFlag("network.mode", "--net")
		if hasList {
			if mode != NetworkAllow {
				return fmt.Errorf("flag --net %q: only allow takes a list (allow:HOST,...); the modes are none, allow and host", o.Net)
			}
			for _, h := range strings.Split(list, ",") {
				if h = strings.TrimSpace(h); h != "" {
					p.Network.Allow = append(p.Network.Allow, h)
				}
			}
			p.MarkFlag("network.allow", "--net")
		}
	}
	for _, pf := range []struct {
		flag, field, v string
		dst            **[]int
	}{{"--tcp-bind", "network.tcp_bind", o.TCPBind, &p.Network.TCPBind}, {"--tcp-connect", "network.tcp_connect", o.TCPConnect, &p.Network.TCPConnect}} {
		if !given(strings.TrimPrefix(pf.flag, "--"), pf.v) {
			continue
		}
		list, err := parsePorts(pf.v)
		if err != nil {
			return fmt.Errorf("flag %s %q: %v", pf.flag, pf.v, err)
		}
		*pf.dst = &list
		p.MarkFlag(pf.field, pf.flag)
	}
	for _, pl := range []struct {
		flag, field string
		list        []string
		dst, other  *[]string // other: the list a path the flag names leaves
	}{
		{"--ro", "filesystem.read_only", o.ReadOnlyPaths, &p.Filesystem.ReadOnly, &p.Filesystem.ReadWrite},
		{"--rw", "filesystem.read_write", o.ReadWritePaths, &p.Filesystem.ReadWrite, &p.Filesystem.ReadOnly},
		{"--deny", "filesystem.deny", o.DenyPaths, &p.Filesystem.Deny, nil},
	} {
		if len(pl.list) == 0 {
			continue
		}
		list, err := abs(pl.flag, pl.list)
		if err != nil {
			return err
		}
		*pl.dst = append(*pl.dst, list...)
		p.MarkFlag(pl.field, pl.flag)
		if pl.other != nil {
			// --rw /etc over the default's read-only /etc makes it
			// writable, and --ro over a file's read_write read-only: the
			// flag decides for the path it names, which a path in both
			// lists would leave to the order of the mounts.
			*pl.other = slices.DeleteFunc(*pl.other, func(e string) bool {
				return slices.ContainsFunc(list, func(f string) bool { return filepath.Clean(f) == filepath.Clean(e) })
			})
		}
	}
	var errs []string
	for _, e := range o.Env {
		if name, _, _ := strings.Cut(e, "="); name == "" || strings.ContainsRune(e, 0) {
			// Said of the flag as given: the field an empty name lands in
			// is no help.
			errs = append(errs, fmt.Sprintf("flag --env: %q: want NAME (to pass the variable through) or NAME=VALUE, NAME not empty", e))
			continue
		}
		if name, val, ok := strings.Cut(e, "="); ok {
			if p.Env.Set == nil {
				p.Env.Set = map[string]string{}
			}
			p.Env.Set[name] = val
			p.MarkFlag("env.set."+name, "--env")
		} else {
			p.Env.Pass = append(p.Env.Pass, e)
			p.MarkFlag("env.pass", "--env")
		}
	}
	for _, v := range valueOverrides() {
		raw := v.raw(o)
		if !given(strings.TrimPrefix(v.flag, "--"), raw) {
			continue
		}
		p.MarkFlag(v.field, v.flag)
		if want, err := v.set(p, raw); err != nil {
			if strings.HasPrefix(raw, "--") {
				// "--memory -- cmd": the value was left out, and what
				// came next was taken for it.
				errs = append(errs, fmt.Sprintf("flag %s needs a value (it took %q, the next argument, for it)", v.flag, raw))
			} else if strings.Contains(err.Error(), ": want ") {
				// The parser's error names the value and what it wants.
				errs = append(errs, fmt.Sprintf("flag %s: %v", v.flag, err))
			} else {
				errs = append(errs, fmt.Sprintf("flag %s: invalid value %q: %v (want %s)", v.flag, raw, err, want))
			}
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return o.applyDocker(p)
}

// applyDocker applies Docker's spellings that are not another name of
// one of moat's options.
func (o *Overrides) applyDocker(p *Policy) error {
	if o.ReadOnly {
		if (o.WorkspaceMode != "" || o.Given["workspace-mode"]) && o.WorkspaceMode != WorkspaceReadOnly {
			return fmt.Errorf("--read-only means --workspace-mode readonly, but --workspace-mode is %q", o.WorkspaceMode)
		}
		p.Workspace.Mode = WorkspaceReadOnly
		p.MarkFlag("workspace.mode", "--read-only")
	}
	if o.User != "" || o.Given["user"] {
		uid, gid, hasGID := strings.Cut(o.User, ":")
		u, err := strconv.Atoi(uid)
		g := 0
		if err == nil && hasGID {
			g, err = strconv.Atoi(gid)
		}
		if err != nil {
			return fmt.Errorf("flag --user %q: moat takes numeric ids, UID or UID:GID (names mean nothing inside the sandbox)", o.User)
		}
		p.User.UID = u
		p.MarkFlag("user.uid", "--user")
		if hasGID {
			p.User.GID = g
			p.MarkFlag("user.gid", "--user")
		}
	}
	return nil
}

// WorkDir returns the absolute working directory o asks for (-w), or ""
// when it asks for none (the sandbox then picks one). It must lie inside
// p's workspace, since that is where a command runs: call it after
// [Policy.Resolve]. Whether it is a directory is for the caller to check
// (this package reads no directory).
func (o *Overrides) WorkDir(p *Policy) (string, error) {
	if o.Workdir == "" {
		if o.Given["workdir"] {
			return "", errors.New("flag -w: empty value; give a DIR inside the workspace")
		}
		return "", nil
	}
	dir := o.Workdir
	if !filepath.IsAbs(dir) {
		if o.Dir == "" {
			return "", fmt.Errorf("flag -w %s: a relative path needs a base directory (Overrides.Dir)", o.Workdir)
		}
		dir = filepath.Join(o.Dir, dir)
	}
	dir = filepath.Clean(dir)
	ws := p.Workspace.Path
	if rel, err := filepath.Rel(ws, dir); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("flag -w %s: outside the workspace %s; the command runs inside the workspace (choose another with --workspace)", o.Workdir, ws)
	}
	return dir, nil
}

// parsePorts reads a --tcp-bind or --tcp-connect value: port numbers
// separated by commas, or "none" for no port at all. Ranges are checked
// by Validate.
func parsePorts(v string) ([]int, error) {
	list := []int{}
	if v == "none" {
		return list, nil
	}
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not a port number; write ports separated by commas (22,8080) or none", s)
		}
		list = append(list, n)
	}
	return list, nil
}

// ClosestOption is the name in known nearest to name, a mistyped option
// (a flag without its dashes), for a "did you mean": "" when none is
// near enough to be what was meant. Names of one or two letters (Docker's
// -e, -it) are never suggested: a near miss is rarely one of them.
func ClosestOption(name string, known []string) string {
	best, bestD := "", max(1, len(name)/3)+1
	for _, k := range known {
		if len(k) <= 2 {
			continue
		}
		if d := suggest.Distance(name, k); d < bestD || d == bestD && len(k) > len(best) {
			best, bestD = k, d
		}
	}
	return best
}
