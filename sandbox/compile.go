package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/fsid"
	"github.com/moatbox/moat/internal/lookpath"
	"github.com/moatbox/moat/internal/overlay"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// Caller is who is asking for the run, on the host.
type Caller struct {
	UID, GID int
	Home     string   // the caller's home directory, refused as a workspace
	Environ  []string // the caller's environment, filtered by env.pass
	Cwd      string   // the working directory, kept when inside the workspace
	// Owner, when above 0, is the user who named the workspace and the
	// writable paths (a daemon's tenant, not the daemon): as root, only
	// trees that user owns are mounted from those paths
	// (backend.Mount.Owner), whatever they lead to when mounted.
	Owner int
	// OwnerGID is Owner's group, and OwnerGroups its supplementary
	// groups: as root, the paths Owner named are resolved and opened with
	// Owner's filesystem rights (Owner, OwnerGID, OwnerGroups), here and
	// by the backend (backend.Mount.OpenUID), so that what Owner could
	// not reach itself is as missing to it. An OwnerGID of 0 is taken as
	// unknown: the overflow group (65534), which grants nothing of its
	// own, not root's.
	OwnerGID    int
	OwnerGroups []int
	// WorkspaceMade says the workspace is one the caller made for Owner
	// (a daemon's), in a directory Owner cannot reach: it and the paths
	// in it are looked at and opened with the caller's rights, the
	// others Owner named with Owner's.
	WorkspaceMade bool
	// StateWorkspace says the workspace is one moat made in its state
	// directory (a daemon's temporary one): the only workspace, and
	// the only read-write paths (those in it), allowed there. Any other
	// would let the command write the records the next moat acts on.
	StateWorkspace bool
}

// asOwner runs fn with c.Owner's filesystem rights when the paths c names
// are another user's to name and this process is root (see Caller.Owner);
// with this process's own otherwise.
func asOwner(c Caller, fn func()) error {
	if c.Owner <= 0 || c.Owner == os.Geteuid() || os.Geteuid() != 0 {
		fn()
		return nil
	}
	return fsid.Do(c.Owner, c.ownerGID(), c.OwnerGroups, fn)
}

// ownerGID is the group Owner's paths are looked at with.
func (c Caller) ownerGID() int {
	if c.OwnerGID <= 0 {
		return 65534
	}
	return c.OwnerGID
}

// CurrentCaller describes this process.
func CurrentCaller() Caller {
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	return Caller{UID: os.Geteuid(), GID: os.Getegid(), Home: home, Environ: os.Environ(), Cwd: cwd}
}

// procMasked are /proc entries that leak host information or control the
// host kernel; they are hidden inside. procReadOnly are kernel knobs a
// namespace owner could otherwise write (e.g. net.* sysctls of its own
// network namespace).
var (
	procMasked = []string{
		"/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list",
		"/proc/sched_debug", "/proc/latency_stats", "/proc/sysrq-trigger",
		"/proc/kallsyms", "/proc/kmsg", "/proc/acpi", "/proc/scsi",
		"/proc/asound", "/proc/firmware",
	}
	procReadOnly = []string{"/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq"}
)

// Compile turns a validated, resolved policy and a command line into the
// backend Spec. It reads the host's file system only to see what exists
// (symlinked system directories, deny paths), and makes no changes. A
// deny or read-only path missing where the command could create it is
// refused (checkMissingProtections), and its mount is not optional: one
// removed before the backend mounts it fails the run
// (backend.GoneError).
//
// cs is the change set holding the copy-on-write layers, for the overlay
// and copy workspace modes; nil otherwise. guards are what the run
// protects (workspace.NewGuard), the workspace's first: the git directory
// a worktree's .git file names, bound beside the workspace, and where the
// command writes, the protected paths, read-only, with the directories
// above them pinned.
//
// As root, for a Caller.Owner, the host's file system is looked at with
// the owner's rights (asOwner), and the mounts of the paths it named are
// opened with them (backend.Mount.OpenUID).
func Compile(p *policy.Policy, args []string, c Caller, runID string, cs *workspace.ChangeSet, guards []*workspace.Guard) (spec *backend.Spec, err error) {
	// The daemons' sockets are the caller's to know, and found with its
	// rights (in its state directory, which a tenant cannot read).
	socks, err := liveDaemonSockets(c)
	if err != nil {
		return nil, err
	}
	if c.WorkspaceMade {
		return compile(p, args, c, runID, cs, guards, socks)
	}
	if derr := asOwner(c, func() { spec, err = compile(p, args, c, runID, cs, guards, socks) }); derr != nil {
		return nil, derr
	}
	return spec, err
}

func compile(p *policy.Policy, args []string, c Caller, runID string, cs *workspace.ChangeSet, guards []*workspace.Guard, socks []liveSocket) (*backend.Spec, error) {
	if len(args) == 0 {
		return nil, errors.New("no command given")
	}
	if args[0] == "" {
		return nil, errors.New("the command's name is empty")
	}
	ws := p.Workspace.Path
	if !filepath.IsAbs(ws) {
		return nil, fmt.Errorf("workspace %q is not absolute (policy not resolved)", ws)
	}
	st, err := os.Stat(ws)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", ws)
	}
	if err := workspaceAccess(ws); err != nil {
		return nil, err
	}
	// The workspace is held to these by the path as given and by what it
	// names (a symlink to / or to a directory holding the home, or a
	// working directory reached through one): what is mounted is the
	// latter.
	for _, path := range []string{ws, realPath(ws)} {
		if path == "/" {
			what := "workspace is /"
			if path != ws {
				what = fmt.Sprintf("workspace %s is /", ws)
			}
			return nil, fmt.Errorf("%s: it would expose the whole host; run moat from a project directory or pass --workspace DIR", what)
		}
		for _, own := range []string{"/dev", "/proc", "/sys"} {
			if within(own, path) {
				// The sandbox mounts its own there, over the workspace:
				// what the command wrote would go nowhere.
				return nil, fmt.Errorf("workspace %s is in %s, which the sandbox has its own of; run moat from a project directory or pass --workspace DIR", ws, own)
			}
		}
		if c.Home != "" && c.Home != "/" && (within(path, c.Home) || within(path, realPath(c.Home))) {
			return nil, fmt.Errorf("workspace %s contains your home directory %s (and with it ~/.ssh, ~/.aws and other projects); run moat from a project directory or pass --workspace DIR", ws, c.Home)
		}
		if state := inStateDir(path); state != "" && !c.StateWorkspace {
			return nil, fmt.Errorf("workspace %s is inside moat's state directory %s (the policies you trusted, the change sets, a daemon's records of its sessions): a command that could write there would forge what moat does next; choose a workspace outside it (--workspace DIR)", ws, state)
		}
		if state := holdsStateDir(path); state != "" {
			return nil, fmt.Errorf("workspace %s contains moat's state directory %s (the policies you trusted, the quarantine, the change sets): a command that could write it would trust its own policy; choose a workspace without it (--workspace DIR), or a state directory outside the workspace (MOAT_STATE_DIR)", ws, state)
		}
		if why := hostSystem(path); why != "" {
			return nil, fmt.Errorf("workspace %s %s; run moat from a project directory or pass --workspace DIR", ws, why)
		}
	}
	// In a workspace the caller made, only the paths outside it are
	// looked at with the owner's rights (Compile runs with them
	// otherwise), all at once.
	made := func(path string) bool { return c.WorkspaceMade && within(ws, path) }
	sysMounts, denied, rwReal := map[string]backend.Mount{}, map[string][]string{}, map[string]string{}
	rwMissing := map[string]bool{}
	missing := func(path string) bool {
		_, err := os.Stat(path)
		return errors.Is(err, fs.ErrNotExist)
	}
	present := map[string]bool{}
	if c.WorkspaceMade {
		if err := asOwner(c, func() {
			for _, path := range append(slices.Clone(p.Filesystem.ReadOnly), p.Filesystem.Deny...) {
				if !made(path) {
					present[path] = lexists(path)
				}
			}
			for _, src := range p.Filesystem.ReadOnly {
				if !made(src) {
					sysMounts[src] = systemMount(src)
				}
			}
			for _, rw := range p.Filesystem.ReadWrite {
				if !made(rw) {
					rwReal[rw] = realPath(rw)
					rwMissing[rw] = missing(rw)
				}
			}
			for _, d := range p.Filesystem.Deny {
				if !made(d) {
					denied[d] = denyTargets(d)
				}
			}
		}); err != nil {
			return nil, err
		}
	}
	rwSource := func(rw string) string {
		if r, ok := rwReal[rw]; ok {
			return r
		}
		return realPath(rw)
	}
	// A writable path is held to the workspace's rule: neither / nor a
	// directory holding the caller's home (a symlink to one included).
	for i, rw := range p.Filesystem.ReadWrite {
		field := fmt.Sprintf("filesystem.read_write[%d]", i)
		// Bound from the host, a read-write path must be there. One in
		// a workspace the caller made is the command's business, and one
		// outside it was looked up with the owner's rights: nothing here
		// tells a tenant what only the daemon could see.
		if gone, known := rwMissing[rw]; gone || !known && !made(rw) && missing(rw) {
			return nil, p.FieldError(field, fmt.Sprintf("%s does not exist: a read-write path is the host's own, shown to the command; create it first", rw))
		}
		made := ""
		if c.StateWorkspace {
			made = realPath(ws)
		}
		if err := checkWritable(p, field, rw, rwSource(rw), c.Home, made); err != nil {
			return nil, err
		}
	}
	if err := CheckWorkspacePaths(p); err != nil {
		return nil, err
	}
	if err := checkMissingProtections(p, ws, cs, present); err != nil {
		return nil, err
	}
	if err := checkDaemonSockets(p, socks); err != nil {
		return nil, err
	}
	layered := p.Workspace.Mode == policy.WorkspaceOverlay || p.Workspace.Mode == policy.WorkspaceCopy
	if layered && cs == nil {
		return nil, fmt.Errorf("workspace.mode %q needs a change set", p.Workspace.Mode)
	}

	filters, atExec, err := seccompProfiles(p)
	if err != nil {
		return nil, err
	}

	envPolicy := p.Env
	if p.Network.Mode == policy.NetworkAllow {
		// The proxy variables win over anything passed through.
		set := map[string]string{}
		for k, v := range p.Env.Set {
			set[k] = v
		}
		for k, v := range proxyEnv(p.Network.Allow) {
			set[k] = v
		}
		envPolicy.Set = set
	}
	env := buildEnv(envPolicy, c.Environ)
	home := sandboxHome(env)

	id := backend.Identity{UID: p.User.UID, GID: p.User.GID, HostUID: c.UID, HostGID: c.GID}
	root := c.UID == 0
	if root {
		// The command must never be host root in disguise.
		id.HostUID, id.HostGID = p.User.HostUID, p.User.HostGID
	}

	realWS := realPath(ws)
	owner := c.Owner // a backend that cannot check it refuses the run
	// The workspace the caller made is not a path the owner named: the
	// owner never reaches the directory it is in, so it cannot swap it,
	// and it is mounted unchecked (which gvisor, unable to check, can).
	wsOwner := owner
	if c.WorkspaceMade {
		wsOwner = 0
	}
	// The binds of the paths the caller named (the policy's, the
	// workspace, what its guards bind) are opened with the owner's
	// rights: only the copy's layer, the daemon's, is not.
	namedMount := func(m backend.Mount) backend.Mount {
		if owner > 0 && !made(m.Target) {
			m.OpenUID, m.OpenGID, m.OpenGroups = owner, c.ownerGID(), c.OwnerGroups
		}
		return m
	}
	// Binds and tmpfs mounts, sorted so that parents come before children.
	var tree []backend.Mount
	// binds are the host trees the sandbox shows, each as its real path
	// on the host and where the sandbox has it: a symlink in a path's
	// spelling makes the two differ (see the denied paths below).
	var binds [][2]string
	tree = append(tree, backend.Mount{Kind: backend.MountTmpfs, Target: "/tmp", Options: "mode=1777"})
	for _, src := range p.Filesystem.ReadOnly {
		m, ok := sysMounts[src]
		if !ok {
			m = systemMount(src)
		}
		if m.Kind == backend.MountSymlink {
			// A link is made anew only in the sandbox's own root: in a
			// tree that is shown already, it is there, as the tree has
			// it, and making it fails.
			if in := shownAbove(p, ws, src); in != "" {
				return nil, fmt.Errorf("filesystem.read_only: %s is a symbolic link (to %s) in %s, which shows it as it is already; to make what it leads to read-only, name that path instead", src, m.Source, in)
			}
		}
		if m.Kind == backend.MountBind {
			binds = append(binds, [2]string{m.Source, src})
			m = namedMount(m)
			if within(ws, src) {
				m.Owner = wsOwner // a path the caller named, as the workspace is
			}
			// In a tree the command may write, the path existed when
			// checkMissingProtections looked; gone by the time the
			// backend binds it, the command could make it and write it.
			m.Optional = writableIn(p, ws, src) == ""
		}
		tree = append(tree, m)
	}
	binds = append(binds, [2]string{realWS, ws})
	for _, src := range p.Filesystem.ReadWrite {
		binds = append(binds, [2]string{rwSource(src), src})
		tree = append(tree, namedMount(backend.Mount{Kind: backend.MountBind, Source: rwSource(src), Target: src, IDMap: root, Owner: owner}))
	}
	tree = append(tree, backend.Mount{Kind: backend.MountTmpfs, Target: home,
		Options: fmt.Sprintf("mode=0700,uid=%d,gid=%d", id.UID, id.GID)})
	switch p.Workspace.Mode {
	case policy.WorkspaceOverlay:
		tree = append(tree, namedMount(backend.Mount{Kind: backend.MountOverlay, Source: cs.Workspace(), Target: ws,
			Layers: cs.Dir(), IDMap: root, Owner: wsOwner}))
	case policy.WorkspaceCopy:
		tree = append(tree, backend.Mount{Kind: backend.MountBind, Source: cs.UpperDir(), Target: ws, IDMap: root})
	default:
		tree = append(tree, namedMount(backend.Mount{Kind: backend.MountBind, Source: realWS, Target: ws,
			ReadOnly: p.Workspace.Mode == policy.WorkspaceReadOnly, IDMap: root, Owner: wsOwner}))
	}
	for _, g := range guards {
		for _, b := range g.Binds() {
			tree = append(tree, namedMount(backend.Mount{Kind: backend.MountBind, Source: b.Path, Target: b.Path,
				ReadOnly: b.ReadOnly || p.Workspace.Mode == policy.WorkspaceReadOnly, IDMap: root, Owner: owner}))
		}
	}
	sort.SliceStable(tree, func(i, j int) bool { return depth(tree[i].Target) < depth(tree[j].Target) })

	mounts := tree
	mounts = append(mounts,
		backend.Mount{Kind: backend.MountProc, Target: "/proc"},
		backend.Mount{Kind: backend.MountDev, Target: "/dev"})
	mounts = append(mounts, identityFiles(id, home)...)
	if p.Network.Mode == policy.NetworkAllow {
		// The TUN device's resolver: the only DNS the sandbox has. The
		// host's /etc/hosts would answer its names with their real
		// addresses first, which the TUN device then sees without the
		// name (a TLS connection to one was refused as an SNI mismatch;
		// found by a tester): the proxy, on the host, reads it.
		mounts = append(mounts, backend.Mount{Kind: backend.MountFile, Target: fileTarget("/etc/resolv.conf"), Data: resolvConf, Optional: true},
			backend.Mount{Kind: backend.MountFile, Target: fileTarget("/etc/hosts"), Data: hostsFile, Optional: true})
	}
	for _, g := range guards {
		for _, pr := range g.Protections() {
			kind := backend.MountReadOnly
			if pr.Pin {
				kind = backend.MountPin
			}
			// Inside the workspace the path exists (the guard saw it, and
			// a run that finds it gone must not go on unprotected);
			// elsewhere only where the sandbox has it at all.
			mounts = append(mounts, backend.Mount{Kind: kind, Target: pr.Path, Optional: !g.Inside(pr.Path)})
		}
	}
	for _, d := range p.Filesystem.Deny {
		targets, ok := denied[d]
		if !ok {
			targets = denyTargets(d)
		}
		// A tree bound by a path with a symlink in it (a read-write
		// path, the workspace) shows what the denied path names at
		// another path too, under its spelling: it is masked there as
		// well (it was readable and writable there).
		// One the host does not have is not mapped: there is nothing to
		// hide, and a mask the backend finds nothing under would stop
		// the run.
		for _, t := range slices.Clone(targets) {
			for _, b := range binds {
				if b[0] != b[1] && within(b[0], t) && lexists(t) {
					if rel, err := filepath.Rel(b[0], t); err == nil {
						if at := filepath.Join(b[1], rel); !slices.Contains(targets, at) {
							targets = append(targets, at)
						}
					}
				}
			}
		}
		for _, t := range targets {
			// A path the command could create (in a tree it may write)
			// existed when checkMissingProtections looked: if it has
			// gone by the time the backend masks it, the run fails
			// rather than leave it for the command to make and use.
			// Elsewhere a path the sandbox does not have needs no
			// hiding (the default policy names some not every host has).
			mounts = append(mounts, backend.Mount{Kind: backend.MountMask, Target: t, Optional: writableIn(p, ws, t) == ""})
		}
	}

	// A read-only path may hold the state directory (--ro ~/.local): the
	// command must not read the trusted policies, other runs' change
	// sets and quarantine, nor the daemon's records and the workspaces it
	// made for other sessions. It is hidden as a denied path is.
	for _, t := range stateMasks(p, ws) {
		mounts = append(mounts, backend.Mount{Kind: backend.MountMask, Target: t, Optional: true})
	}

	dir := ws
	if c.Cwd != "" && within(ws, c.Cwd) {
		dir = c.Cwd
	}
	return &backend.Spec{
		RunID:         runID,
		Args:          args,
		Env:           env,
		Dir:           dir,
		Hostname:      hostname,
		Mounts:        mounts,
		User:          id,
		Limits:        limits(p.Limits),
		Network:       networkSpec(p.Network),
		MaskPaths:     procMasked,
		ReadOnlyPaths: procReadOnly,
		Seccomp:       filters,
		SeccompAtExec: atExec,
		Landlock:      p.Filesystem.Landlock != policy.LandlockOff,
	}, nil
}

// systemMount is a read-only system path: a symlink on the host (merged
// /usr: /bin -> usr/bin) is recreated as a symlink, since binding it
// would bind its target at the wrong place.
func systemMount(src string) backend.Mount {
	if fi, err := os.Lstat(src); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if dest, err := os.Readlink(src); err == nil {
			return backend.Mount{Kind: backend.MountSymlink, Source: dest, Target: src}
		}
	}
	return backend.Mount{Kind: backend.MountBind, Source: realPath(src), Target: src, ReadOnly: true, Optional: true}
}

// checkMissingProtections refuses a filesystem.deny or filesystem.read_only
// path that does not exist where the command could create it: in the
// workspace (unless read-only) or a read_write path, and not below a
// read_only path inside those. The backend hides or binds only what
// exists, so such a path would be the command's to make and use, in the
// real workspace in direct mode, where the person who asked for it hidden
// or read-only would never see it happen. A missing path anywhere else
// is left alone: the sandbox shows nothing of the host there and the
// command can create nothing (the sandbox's root is read-only, its /tmp
// and home its own), and the default policy names paths some hosts lack.
//
// present holds what was looked up already (with the owner's rights, for
// a workspace the caller made); the others are looked up here.
func checkMissingProtections(p *policy.Policy, ws string, cs *workspace.ChangeSet, present map[string]bool) error {
	exists := func(path string) bool {
		if cs != nil && within(ws, path) {
			// What the change set's layer holds shows over the real
			// workspace (overlay), or is the whole of it (copy).
			rel, _ := filepath.Rel(ws, path)
			fi, err := os.Lstat(filepath.Join(cs.UpperDir(), rel))
			switch {
			case err == nil:
				return !overlay.IsWhiteout(fi)
			case p.Workspace.Mode == policy.WorkspaceCopy:
				return false
			}
		}
		if ok, known := present[path]; known {
			return ok
		}
		return lexists(path)
	}
	for _, l := range []struct {
		field, what string
		paths       []string
	}{
		{"filesystem.deny", "hidden", p.Filesystem.Deny},
		{"filesystem.read_only", "made read-only", p.Filesystem.ReadOnly},
	} {
		for i, path := range l.paths {
			in := writableIn(p, ws, path)
			if in == "" || exists(path) {
				continue
			}
			where := in
			if in == ws {
				where = "the workspace " + ws
			}
			return p.FieldError(fmt.Sprintf("%s[%d]", l.field, i), fmt.Sprintf(
				"%s does not exist, so it cannot be %s, and the command could create it in %s, which it may write, and use it; create it first, or name an existing directory above it", path, l.what, where))
		}
	}
	return nil
}

// writableIn returns the tree the command may write that shows path (the
// workspace unless read-only, or a read_write path), "" if the innermost
// tree holding path (other than path itself) is read-only, or if none
// does. A deny or read-only path there is one the command could create
// were it missing: checkMissingProtections refuses it missing, and its
// mount is not optional (backend.Mount.Optional).
func writableIn(p *policy.Policy, ws, path string) string {
	in, writable := "", false
	consider := func(tree string, w bool) {
		if tree != path && within(tree, path) && (in == "" || depth(tree) > depth(in)) {
			in, writable = tree, w
		}
	}
	consider(ws, p.Workspace.Mode != policy.WorkspaceReadOnly)
	for _, rw := range p.Filesystem.ReadWrite {
		consider(rw, true)
	}
	for _, ro := range p.Filesystem.ReadOnly {
		consider(ro, false)
	}
	if !writable {
		return ""
	}
	return in
}

// lexists reports whether path exists, a symbolic link included. An error
// other than "does not exist" counts as existing: the backend then fails
// on the path, naming it, rather than skip it.
func lexists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// denyTargets returns where a denied path must be masked: the path itself
// and, when it is a symlink on the host, what it points to.
func denyTargets(p string) []string {
	out := []string{p}
	if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
		out = append(out, real)
	}
	return out
}

func limits(l policy.Limits) backend.Limits {
	return backend.Limits{
		Wall:        time.Duration(l.Wall),
		CPUTime:     time.Duration(l.CPU),
		OpenFiles:   uint64(l.OpenFiles),
		FileSize:    uint64(l.FileSize),
		OutputBytes: int64(l.Output),
		MemoryBytes: int64(l.Memory),
		Pids:        l.Pids,
		CPUs:        l.CPUs,
		DiskBytes:   int64(l.Disk),
	}
}

// buildEnv keeps only the variables env.pass allows, then applies env.set.
func buildEnv(e policy.Env, environ []string) []string {
	vals := map[string]string{}
	var order []string
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		for _, pat := range e.Pass {
			if m, _ := path.Match(pat, name); m {
				if _, seen := vals[name]; !seen {
					order = append(order, name)
				}
				vals[name] = val
				break
			}
		}
	}
	setNames := make([]string, 0, len(e.Set))
	for name := range e.Set {
		setNames = append(setNames, name)
	}
	sort.Strings(setNames)
	for _, name := range setNames {
		if _, seen := vals[name]; !seen {
			order = append(order, name)
		}
		vals[name] = e.Set[name]
	}
	if _, ok := vals["PATH"]; !ok {
		order = append(order, "PATH")
		vals["PATH"] = lookpath.DefaultPath
	}
	out := make([]string, 0, len(order))
	for _, name := range order {
		out = append(out, name+"="+vals[name])
	}
	return out
}

// sandboxHome is the home directory of a sandbox whose environment is
// env: its HOME, when absolute, or /home/agent. It is a tmpfs of the
// sandbox's own.
func sandboxHome(env []string) string {
	home := "/home/agent"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok && filepath.IsAbs(v) {
			home = filepath.Clean(v)
		}
	}
	return home
}

// hostSystemDirs hold what the host's own programs run and read as
// root: its programs and libraries, its configuration, its boot files,
// its packages' state and the jobs its schedulers run. A command that
// could write there (as root, a root caller's workspace is written as
// its owner) could have code run as root on the host.
var hostSystemDirs = []string{"/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/sbin", "/usr", "/var/lib", "/var/spool"}

// hostSystem says why path may not be written by a sandbox ("is in
// /etc, ..."), "" when nothing forbids it: it lies in or holds one of
// hostSystemDirs, or holds /home (every user's home). moat's own state
// directory, where a daemon makes workspaces, is not the host's.
func hostSystem(path string) string {
	if state, err := workspace.StateDir(); err == nil && (within(state, path) || within(realPath(state), path)) {
		return ""
	}
	for _, d := range hostSystemDirs {
		switch {
		case path == d:
			return fmt.Sprintf("is %s, the host's own system files (a file written there could run as root on the host)", d)
		case within(d, path):
			return fmt.Sprintf("is in %s, the host's own system files (a file written there could run as root on the host)", d)
		case within(path, d):
			return fmt.Sprintf("contains %s, the host's own system files (a file written there could run as root on the host)", d)
		}
	}
	if within(path, "/home") {
		what := "contains /home"
		if path == "/home" {
			what = "is /home"
		}
		return what + ", every user's home directory"
	}
	return ""
}

// inStateDir returns moat's state directory when path is in it, or is it.
func inStateDir(path string) string {
	state, err := workspace.StateDir()
	if err != nil {
		return ""
	}
	if within(state, path) || within(realPath(state), path) {
		return state
	}
	return ""
}

// holdsStateDir returns moat's state directory (workspace.StateDir) if
// the directory path holds it, "" otherwise. The trusted policies are kept
// there: a command that could write them would have its own .moat.toml
// trusted for the next run, and the quarantine and change sets are the
// person's to review, not the command's to rewrite. A workspace inside it
// (a daemon's made workspace may be) is not refused: it holds none of it.
func holdsStateDir(path string) string {
	state, err := workspace.StateDir()
	if err != nil {
		return "" // no state directory: nothing is kept there
	}
	if within(path, state) || within(path, realPath(state)) {
		return state
	}
	return ""
}

// stateMasks returns what hides moat's state directory from a sandbox
// that shows it through one of the policy's read-only paths: the state
// directory (by its path and, when a link leads to it, by where it is),
// or, when the workspace or a read-write path is inside it (a workspace
// the daemon made), everything in it but the way to those, which are
// shown by their own mounts.
func stateMasks(p *policy.Policy, ws string) []string {
	state, err := workspace.StateDir()
	if err != nil {
		return nil
	}
	keep := append([]string{ws}, p.Filesystem.ReadWrite...)
	var out []string
	seen := map[string]bool{}
	for _, dir := range []string{state, realPath(state)} {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		shown := false
		for _, ro := range p.Filesystem.ReadOnly {
			shown = shown || within(ro, dir) || within(realPath(ro), dir)
		}
		if shown {
			out = append(out, maskAround(dir, keep)...)
		}
	}
	return out
}

// maskAround returns dir if none of keep is in it, else the entries of
// dir that hold none of keep, and, in those that do, the same again.
func maskAround(dir string, keep []string) []string {
	var inside []string
	for _, k := range keep {
		if within(dir, k) || within(dir, realPath(k)) {
			inside = append(inside, k, realPath(k))
		}
	}
	if len(inside) == 0 {
		return []string{dir}
	}
	if slices.Contains(inside, dir) {
		return nil // shown by its own mount
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return []string{dir}
	}
	var out []string
	for _, e := range ents {
		out = append(out, maskAround(filepath.Join(dir, e.Name()), inside)...)
	}
	return out
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// shownAbove returns the tree the sandbox shows p in, other than its own
// root: the workspace, or a read-write or read-only path above p; "" if
// none.
func shownAbove(p *policy.Policy, ws, path string) string {
	if within(ws, path) {
		return ws
	}
	for _, d := range append(slices.Clone(p.Filesystem.ReadWrite), p.Filesystem.ReadOnly...) {
		if d != path && within(d, path) {
			return d
		}
	}
	return ""
}

func depth(p string) int { return strings.Count(filepath.Clean(p), "/") }

// realPath resolves symlinks in a bind source, so the backend binds what
// the path names on the host: an absolute symlink would otherwise be
// followed inside the sandbox's half-built root. A path that does not
// resolve is returned as it is (optional mounts are then skipped, others
// fail with the path named).
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// workspaceAccess refuses a workspace the caller may not list or enter,
// plainly, before the guard and the sandbox's chdir fail on it in words
// of their own.
func workspaceAccess(ws string) error {
	fi, err := os.Stat(ws)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("workspace %s does not exist; make it, or pass --workspace DIR", ws)
	case err == nil && !fi.IsDir():
		return fmt.Errorf("workspace %s is not a directory; pass --workspace DIR", ws)
	}
	if err := unix.Access(ws, unix.R_OK|unix.X_OK); errors.Is(err, unix.EACCES) {
		return fmt.Errorf("workspace %s: permission denied: you may not list or enter it; run moat from a directory of yours, or pass --workspace DIR", ws)
	}
	return nil
}

// checkWritable holds the writable path rw (source: where its links lead)
// to the workspace's rule: neither / nor a directory holding the caller's
// home, moat's state directory or the host's system, nor one in the state
// directory but in made, a workspace moat made there ("" for none).
func checkWritable(p *policy.Policy, field, rw, source, home, made string) error {
	for _, path := range []string{rw, source} {
		if state := inStateDir(path); state != "" && (made == "" || !within(made, path) && !within(made, realPath(path))) {
			return p.FieldError(field, fmt.Sprintf("%s is inside moat's state directory %s (the policies you trusted, the change sets, a daemon's records of its sessions): a command that could write there would forge what moat does next; list the directories the command needs", rw, state))
		}
		if path == "/" {
			return p.FieldError(field, fmt.Sprintf("%s is /: writing it would expose the whole host, root-only files included; list the directories the command needs", rw))
		}
		if home != "" && home != "/" && (within(path, home) || within(path, realPath(home))) {
			return p.FieldError(field, fmt.Sprintf("%s contains your home directory %s (and with it ~/.ssh, ~/.aws and other projects); list the directories the command needs, such as ~/.cache/pip", rw, home))
		}
		if state := holdsStateDir(path); state != "" {
			return p.FieldError(field, fmt.Sprintf("%s contains moat's state directory %s (the policies you trusted, the quarantine, the change sets): a command that could write it would trust its own policy; list the directories the command needs", rw, state))
		}
		if why := hostSystem(path); why != "" {
			return p.FieldError(field, fmt.Sprintf("%s %s; list the directories the command needs", rw, why))
		}
	}
	return nil
}

// CheckWorkspacePaths refuses, as policy.Validate does for the paths as
// written, a read-only or read-write path that leads to the workspace and
// a denied one at or above it, their links (and the workspace's) followed:
// the first would be ignored, the second would hide the workspace.
func CheckWorkspacePaths(p *policy.Policy) error {
	ws := p.Workspace.Path
	if ws == "" || !filepath.IsAbs(ws) {
		return nil
	}
	real := realPath(ws)
	for _, list := range []struct {
		field string
		paths []string
	}{{"filesystem.read_only", p.Filesystem.ReadOnly}, {"filesystem.read_write", p.Filesystem.ReadWrite}} {
		for i, e := range list.paths {
			if e != "" && realPath(e) == real {
				return p.FieldError(fmt.Sprintf("%s[%d]", list.field, i), fmt.Sprintf(`%s leads to the workspace %s, which workspace.mode shows (direct: writable; "readonly"; overlay or copy: changes kept for review); list other paths here, or set workspace.mode (--workspace-mode)`, e, ws))
			}
		}
	}
	for i, e := range p.Filesystem.Deny {
		if e != "" && within(realPath(e), real) {
			return p.FieldError(fmt.Sprintf("filesystem.deny[%d]", i), fmt.Sprintf("%s would hide the workspace %s from the command; deny paths beside it, or choose another workspace", e, ws))
		}
	}
	return nil
}

// CheckWritablePaths is what moat run checks of filesystem.read_write
// before anything runs, for moat policy check: each path is held to the
// workspace's rule (checkWritable), home the caller's home directory.
func CheckWritablePaths(p *policy.Policy, home string) error {
	var all policy.Errors
	for i, rw := range p.Filesystem.ReadWrite {
		err := checkWritable(p, fmt.Sprintf("filesystem.read_write[%d]", i), rw, realPath(rw), home, "")
		var fe *policy.FieldError
		if errors.As(err, &fe) {
			all = append(all, fe)
		} else if err != nil {
			return err
		}
	}
	if len(all) > 0 {
		return &all
	}
	return nil
}

// withIdentity is the content of an /etc/passwd or /etc/group file less
// the lines of "agent" and those whose field idField is id, plus entry.
func withIdentity(content string, idField int, id, entry string) string {
	var data strings.Builder
	data.Grow(len(content) + len(entry) + 2)
	for rest := strings.TrimRight(content, "\n"); rest != ""; {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		if name, field, ok := nthField(line, idField); ok && (name == "agent" || field == id) {
			continue
		}
		data.WriteString(line)
		data.WriteByte('\n')
	}
	data.WriteString(entry)
	data.WriteByte('\n')
	return data.String()
}

// nthField returns the first and the nth (from 0) colon-separated fields of
// an /etc/passwd or /etc/group line; false if the line has fewer fields.
func nthField(line string, n int) (first, nth string, ok bool) {
	first, _, _ = strings.Cut(line, ":")
	rest := line
	for i := 0; i < n; i++ {
		var found bool
		if _, rest, found = strings.Cut(rest, ":"); !found {
			return "", "", false
		}
	}
	nth, _, _ = strings.Cut(rest, ":")
	return first, nth, true
}

// readSmall reads a small file with plain system calls: os.ReadFile would
// also try to register it with Go's poller (four more calls, for a file
// that cannot be polled).
func readSmall(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// fileTarget is where a file mount at p lands: where p's symbolic links
// lead, as the host has them (the sandbox shows the host's /etc). The
// mount follows them either way, and one leading where the sandbox has
// nothing stopped the run (systemd-resolved's /etc/resolv.conf ->
// ../run/systemd/resolve/stub-resolv.conf); at the end of the links the
// backend makes the file it mounts on.
func fileTarget(p string) string {
	for range 8 {
		t, err := os.Readlink(p)
		if err != nil {
			return p
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		p = filepath.Clean(t)
	}
	return p
}

// identityFiles give the command a name: /etc/passwd and /etc/group as the
// host has them, less any entry that claims the command's ids, plus
// "agent" with the sandbox's home. Without it the command's uid is either
// nameless ("I have no name!", git refusing an empty ident) or shows the
// name of whoever has that uid on the host. Only when /etc is visible.
func identityFiles(id backend.Identity, home string) []backend.Mount {
	var out []backend.Mount
	for _, f := range []struct {
		path, entry string
		idField     int
		id          int
	}{
		{"/etc/passwd", fmt.Sprintf("agent:x:%d:%d:moat sandbox:%s:/bin/sh", id.UID, id.GID, home), 2, id.UID},
		{"/etc/group", fmt.Sprintf("agent:x:%d:", id.GID), 2, id.GID},
	} {
		b, err := readSmall(f.path)
		if err != nil {
			continue
		}
		out = append(out, backend.Mount{Kind: backend.MountFile, Target: fileTarget(f.path),
			Data: withIdentity(string(b), f.idField, strconv.Itoa(f.id), f.entry), Optional: true})
	}
	return out
}
