package policy

import (
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/moatbox/moat/internal/netrule"
)

// Bounds on limits: values beyond them are mistakes, not policies.
const (
	maxOpenFiles = 1 << 20 // the kernel's default fs.nr_open
	// minOpenFiles: moat's init is held to the limit it sets, and needs
	// descriptors of its own to build the sandbox (a Landlock ruleset)
	// and, in a session, to start each command beside those running.
	minOpenFiles = 32
	maxPids      = 1 << 22 // PID_MAX_LIMIT on 64-bit Linux
	// minPids: below it, the sandbox's init cannot start the command.
	minPids = 2
	maxCPUs = 1024
	// maxCPUTime bounds a CPU-time limit or budget: a year of one CPU,
	// far below where the kernel's count in microseconds overflows.
	maxCPUTime = Duration(365 * 24 * time.Hour)
	minMemory  = MiB // below this a cgroup kills the command before it starts
	minDisk    = MiB
	maxID      = 1<<32 - 2 // (uid_t)-1 means "no change" to the kernel
)

// Validate checks every field of p and returns all the problems found as
// *Errors, each naming the file line or flag the value came from, and saying
// what is allowed. It returns nil when p is valid.
func (p *Policy) Validate() error {
	l := &errorList{p: p}
	p.validateWorkspace(l)
	p.validateFilesystem(l)
	p.validateEnv(l)
	p.validateNetwork(l)
	p.validateLimits(l)
	p.validateSyscalls(l)
	p.validateSandbox(l)
	p.validateUser(l)
	p.validateRules(l)
	p.validateSecrets(l)
	p.validateBudgets(l)
	p.validateProxyRules(l)
	return l.err()
}

func (p *Policy) validateWorkspace(l *errorList) {
	w := p.Workspace
	if w.Path == "" {
		l.add("workspace.path", `must not be empty (use "." for the policy file's directory)`)
	} else if strings.ContainsRune(w.Path, 0) {
		l.add("workspace.path", "must not contain a NUL byte")
	}
	oneOf(l, "workspace.mode", w.Mode, WorkspaceDirect, WorkspaceReadOnly, WorkspaceOverlay, WorkspaceCopy)
	for i, e := range w.Protect {
		field := indexKey("workspace.protect", i)
		clean := path.Clean(e)
		switch {
		case e == "":
			l.add(field, "must not be empty")
		case strings.ContainsRune(e, 0):
			l.add(field, "must not contain a NUL byte")
		case path.IsAbs(e):
			l.add(field, fmt.Sprintf("%q is absolute; protect entries are relative to the workspace (use filesystem.read_only for other paths)", e))
		case clean == "..", strings.HasPrefix(clean, "../"):
			l.add(field, fmt.Sprintf("%q is outside the workspace; protect entries are relative to the workspace and stay inside it", e))
		case clean == ".":
			l.add(field, fmt.Sprintf(`%q protects the whole workspace; use workspace.mode = "readonly"`, e))
		}
	}
}

func (p *Policy) validateFilesystem(l *errorList) {
	hostPaths(l, "filesystem.read_only", p.Filesystem.ReadOnly)
	hostPaths(l, "filesystem.read_write", p.Filesystem.ReadWrite)
	hostPaths(l, "filesystem.deny", p.Filesystem.Deny)
	// A path in both lists is shown one way or the other by the order of
	// the mounts, not by what its author meant: it is refused. (A --ro or
	// --rw flag takes its path out of the other list.)
	for i, rw := range p.Filesystem.ReadWrite {
		for j, ro := range p.Filesystem.ReadOnly {
			if rw != "" && path.Clean(rw) == path.Clean(ro) {
				at := ""
				if line := p.lineOf(indexKey("filesystem.read_only", j)); line > 0 {
					at = fmt.Sprintf(" (line %d)", line)
				}
				l.add(indexKey("filesystem.read_write", i), fmt.Sprintf("%q is also in filesystem.read_only%s: a path is shown read-only or writable; list it in one of them", rw, at))
				break
			}
		}
	}
	// A path shown read-only or writable at or below a denied one is
	// hidden whatever the list says: the deny wins, which its author (a
	// --rw flag over a file's deny, say) would not learn from the run.
	for _, list := range []struct {
		field string
		paths []string
	}{{"filesystem.read_write", p.Filesystem.ReadWrite}, {"filesystem.read_only", p.Filesystem.ReadOnly}} {
		for i, e := range list.paths {
			c := path.Clean(e)
			for j, d := range p.Filesystem.Deny {
				if dc := path.Clean(d); e != "" && d != "" && (c == dc || strings.HasPrefix(c, dc+"/") || dc == "/") {
					at := ""
					if line := p.lineOf(indexKey("filesystem.deny", j)); line > 0 && p.Source != "" {
						at = fmt.Sprintf(" (%s:%d)", p.Source, line)
					} else if line > 0 {
						at = fmt.Sprintf(" (line %d)", line)
					}
					l.add(indexKey(list.field, i), fmt.Sprintf("%q is hidden by filesystem.deny %q%s, which wins over %s; take it out of one of them", e, d, at, list.field))
					break
				}
			}
		}
	}
	// The workspace is shown as its mode says: a list naming it would be
	// ignored (read_only, read_write) or hide it (deny, at or above it),
	// neither of which its author meant.
	if ws := p.Workspace.Path; ws != "" && path.IsAbs(ws) {
		ws = path.Clean(ws)
		for _, list := range []struct {
			field string
			paths []string
		}{{"filesystem.read_only", p.Filesystem.ReadOnly}, {"filesystem.read_write", p.Filesystem.ReadWrite}} {
			for i, e := range list.paths {
				if e != "" && path.Clean(e) == ws {
					l.add(indexKey(list.field, i), fmt.Sprintf(`%q is the workspace, which workspace.mode shows (direct: writable; "readonly"; overlay or copy: changes kept for review); list other paths here, or set workspace.mode (--workspace-mode)`, e))
				}
			}
		}
		for i, e := range p.Filesystem.Deny {
			if c := path.Clean(e); e != "" && path.IsAbs(c) && (c == ws || c == "/" || strings.HasPrefix(ws, c+"/")) {
				l.add(indexKey("filesystem.deny", i), fmt.Sprintf("%q would hide the workspace %s from the command; deny paths beside it, or choose another workspace", e, ws))
			}
		}
	}
	oneOf(l, "filesystem.landlock", p.Filesystem.Landlock, LandlockAuto, LandlockRequired, LandlockBestEffort, LandlockOff)
}

// hostPaths checks that every entry is absolute or starts with "~/".
func hostPaths(l *errorList, field string, list []string) {
	for i, e := range list {
		f := indexKey(field, i)
		switch {
		case e == "":
			l.add(f, "must not be empty")
		case strings.ContainsRune(e, 0):
			l.add(f, "must not contain a NUL byte")
		case strings.HasPrefix(e, "~") && e != "~" && !strings.HasPrefix(e, "~/"):
			l.add(f, fmt.Sprintf(`%q: only "~/" (your own home directory) is expanded; write other users' paths in full`, e))
		case !path.IsAbs(e) && e != "~" && !strings.HasPrefix(e, "~/"):
			l.add(f, fmt.Sprintf(`%q is relative; host paths must be absolute or start with "~/"`, e))
		}
	}
}

func (p *Policy) validateEnv(l *errorList) {
	for i, pat := range p.Env.Pass {
		f := indexKey("env.pass", i)
		if _, err := path.Match(pat, ""); err != nil || pat == "" || strings.ContainsAny(pat, "=\x00") {
			l.add(f, fmt.Sprintf(`%q is not a valid name pattern; use a variable name, optionally with * ? or [...] wildcards, e.g. "LC_*"`, pat))
		}
	}
	names := make([]string, 0, len(p.Env.Set))
	for k := range p.Env.Set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		f := joinKey("env.set", k)
		if k == "" || strings.ContainsAny(k, "=\x00") {
			l.add(f, fmt.Sprintf("%q is not a valid variable name: it must be non-empty and contain neither '=' nor NUL", k))
		}
		if strings.ContainsRune(p.Env.Set[k], 0) {
			l.add(f, "value must not contain a NUL byte")
		}
	}
}

func (p *Policy) validateNetwork(l *errorList) {
	n := p.Network
	oneOf(l, "network.mode", n.Mode, NetworkNone, NetworkAllow, NetworkHost)
	destinations(l, "network.allow", n.Allow, true)
	destinations(l, "network.deny", n.Deny, false)
	for i, c := range n.AllowCIDRs {
		if _, err := netrule.ParseCIDR(c); err != nil {
			l.add(indexKey("network.allow_cidrs", i), fmt.Sprintf("%q: %v", c, err))
		}
	}
	// The lists of allowed destinations are read in allow mode only:
	// under none (the default) they would go unused without a word, and
	// the command would have none of the network the list's author
	// expected. A --net none over a file's list is an override, not a
	// mistake.
	if _, byFlag := p.flagFor("network.mode"); n.Mode == NetworkNone && !byFlag && (len(n.Allow) > 0 || len(n.AllowCIDRs) > 0) {
		f := "network.allow"
		if len(n.Allow) == 0 {
			f = "network.allow_cidrs"
		}
		l.add(f, `is read only when network.mode is "allow" (it is "none", the default mode): set mode = "allow", or leave the list out`)
	}
	ports(l, "network.tcp_bind", n.TCPBind, 0)
	ports(l, "network.tcp_connect", n.TCPConnect, 1)
	if (n.TCPBind != nil || n.TCPConnect != nil) && p.Filesystem.Landlock == LandlockOff {
		f := "network.tcp_bind"
		if n.TCPBind == nil {
			f = "network.tcp_connect"
		}
		l.add(f, `TCP port rules are enforced by Landlock, which filesystem.landlock = "off" turns off; leave the ports unset or turn Landlock on`)
	} else if (n.TCPBind != nil || n.TCPConnect != nil) && p.Syscalls.Profile == ProfileUnconfined {
		f := "network.tcp_bind"
		if n.TCPBind == nil {
			f = "network.tcp_connect"
		}
		l.add(f, `TCP port rules hold only while MPTCP sockets, which Landlock does not see, are refused by the system-call filter that syscalls.profile = "unconfined" turns off; leave the ports unset or choose another profile`)
	}
}

// ports checks a list of TCP ports, each from low to 65535.
func ports(l *errorList, field string, list *[]int, low int) {
	if list == nil {
		return
	}
	for i, p := range *list {
		if p < low || p > 65535 {
			l.add(indexKey(field, i), fmt.Sprintf("%d is not a TCP port (%d to 65535)", p, low))
		}
	}
}

// destinations checks allow or deny entries with the grammar the egress
// proxy uses. Whether an allowed name is a public suffix needs the suffix
// list, which the sandbox checks (sandbox.CheckPolicy).
func destinations(l *errorList, field string, list []string, allow bool) {
	for i, d := range list {
		if _, err := netrule.ParseHost(d, allow); err != nil {
			l.add(indexKey(field, i), fmt.Sprintf("%q: %v", d, err))
		}
	}
}

func (p *Policy) validateLimits(l *errorList) {
	lim := p.Limits
	nonNegative := func(field string, v int64) bool {
		if v < 0 {
			l.add(field, fmt.Sprintf("%d is negative; use 0 for no limit", v))
			return false
		}
		return true
	}
	minSize := func(field string, v, least Size) {
		if nonNegative(field, int64(v)) && v > 0 && v < least {
			l.add(field, fmt.Sprintf("%s is too small (min %s, or 0 for no limit); a size without a unit is in bytes", v, least))
		}
	}
	// In the order of the fields of Limits.
	nonNegative("limits.wall", int64(lim.Wall))
	if nonNegative("limits.cpu", int64(lim.CPU)) {
		wholeSeconds(l, "limits.cpu", lim.CPU)
	}
	if lim.CPU > maxCPUTime {
		l.add("limits.cpu", fmt.Sprintf("%v is more than the most moat sets (%v); use 0 for no limit", time.Duration(lim.CPU), time.Duration(maxCPUTime)))
	}
	if nonNegative("limits.open_files", lim.OpenFiles) && lim.OpenFiles > maxOpenFiles {
		l.add("limits.open_files", fmt.Sprintf("%d is too many (max %d)", lim.OpenFiles, maxOpenFiles))
	} else if lim.OpenFiles > 0 && lim.OpenFiles < minOpenFiles {
		l.add("limits.open_files", fmt.Sprintf("%d is too few (min %d): moat's init, held to the same limit, needs descriptors of its own to set up the sandbox and start commands", lim.OpenFiles, minOpenFiles))
	}
	nonNegative("limits.file_size", int64(lim.FileSize))
	nonNegative("limits.output", int64(lim.Output))
	minSize("limits.memory", lim.Memory, minMemory)
	if nonNegative("limits.pids", lim.Pids) && lim.Pids > maxPids {
		l.add("limits.pids", fmt.Sprintf("%d is too many (max %d)", lim.Pids, maxPids))
	} else if lim.Pids > 0 && lim.Pids < minPids {
		l.add("limits.pids", fmt.Sprintf("%d is too few (min %d): the sandbox's init counts too", lim.Pids, minPids))
	}
	switch {
	case math.IsNaN(lim.CPUs) || math.IsInf(lim.CPUs, 0):
		l.add("limits.cpus", fmt.Sprintf("%v is not a number of CPUs", lim.CPUs))
	case lim.CPUs < 0:
		l.add("limits.cpus", fmt.Sprintf("%v is negative; use 0 for no limit", lim.CPUs))
	case lim.CPUs > maxCPUs:
		l.add("limits.cpus", fmt.Sprintf("%v is too many (max %d)", lim.CPUs, maxCPUs))
	case lim.CPUs > 0 && lim.CPUs < 0.01:
		l.add("limits.cpus", fmt.Sprintf("%v is too small (min 0.01, or 0 for no limit)", lim.CPUs))
	}
	minSize("limits.disk", lim.Disk, minDisk)
}

func (p *Policy) validateSandbox(l *errorList) {
	oneOf(l, "sandbox.isolation", p.Sandbox.Isolation, IsolationNative, IsolationGVisor)
	if r := p.Sandbox.Runsc; r != "" && (!path.IsAbs(r) || strings.ContainsRune(r, 0)) {
		l.add("sandbox.runsc", fmt.Sprintf("%q is not an absolute path", r))
	}
}

func (p *Policy) validateSyscalls(l *errorList) {
	prof := p.Syscalls.Profile
	switch {
	case prof == ProfileDefault || prof == ProfileStrict || prof == ProfileUnconfined:
	case strings.ContainsRune(prof, 0):
		l.add("syscalls.profile", "must not contain a NUL byte")
	case !isProfilePath(prof):
		l.add("syscalls.profile", fmt.Sprintf(`%q is not one of default, strict, unconfined, or the path of a JSON profile (containing "/" or ending in ".json")`, prof))
	}
}

// isProfilePath reports whether a syscalls profile names a file rather than
// a built-in profile.
func isProfilePath(prof string) bool {
	return strings.Contains(prof, "/") || strings.HasSuffix(prof, ".json")
}

func (p *Policy) validateUser(l *errorList) {
	id := func(field string, v int, what string) {
		switch {
		case v == 0:
			l.add(field, fmt.Sprintf("0 is root; moat never runs a command as root %s (use 1-%d)", what, int64(maxID)))
		case v < 0 || int64(v) > maxID:
			l.add(field, fmt.Sprintf("%d is out of range (use 1-%d)", v, int64(maxID)))
		}
	}
	id("user.uid", p.User.UID, "inside the sandbox")
	id("user.gid", p.User.GID, "inside the sandbox")
	id("user.host_uid", p.User.HostUID, "on the host")
	id("user.host_gid", p.User.HostGID, "on the host")
}

// oneOf checks that v is one of allowed.
func oneOf(l *errorList, field, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		l.add(field, fmt.Sprintf("%q is not one of %s", v, strings.Join(allowed, ", ")))
	}
}

// wholeSeconds refuses a CPU time that is not a whole number of seconds:
// the kernel counts it so (RLIMIT_CPU), and 1.5s would be 2s, 1ns 1s,
// while moat said what was asked.
func wholeSeconds(l *errorList, field string, d Duration) {
	if d%Duration(time.Second) == 0 {
		return
	}
	down, up := time.Duration(d).Truncate(time.Second), time.Duration(d).Truncate(time.Second)+time.Second
	alt := fmt.Sprintf("%v or %v", down, up)
	if down == 0 {
		alt = up.String()
	}
	l.add(field, fmt.Sprintf("%v is not a whole number of seconds, which is how the kernel counts CPU time (RLIMIT_CPU); use %s", time.Duration(d), alt))
}
