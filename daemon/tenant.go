package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/internal/fsid"
	"github.com/moatbox/moat/internal/pathwalk"
	"github.com/moatbox/moat/policy"
)

// Tenant is who asks: a local user (its uid, from the unix socket's peer
// credentials) or a token's named tenant over TCP.
type Tenant struct {
	ID  string // "uid:1000", "token:NAME"
	UID int    // the local user's uid; -1 for a token's tenant
	// Role is what this credential of the tenant may do; a local user
	// may do everything.
	Role Role
}

// Role limits a tenant's credential to one side of its sessions. Whoever
// drives the sessions (an agent, or the platform that runs it) must not
// be able to answer their own asks: a token of RoleSessions cannot see or
// answer approvals, and a token of RoleApprovals, a person's, can only
// see and answer them. Both reach the same tenant's sessions and
// approvals.
type Role string

const (
	// RoleAll may do everything: the sessions and their approvals.
	RoleAll Role = ""
	// RoleSessions may make, use and end sessions, and not see or
	// answer their approvals.
	RoleSessions Role = "sessions"
	// RoleApprovals may only see and answer the approvals of the
	// tenant's sessions (the API's and the approvals page's).
	RoleApprovals Role = "approvals"
)

// ParseRole reads a role as a tokens file names it: "all", "sessions" or
// "approvals".
func ParseRole(s string) (Role, error) {
	switch s {
	case "all":
		return RoleAll, nil
	case string(RoleSessions), string(RoleApprovals):
		return Role(s), nil
	}
	return "", fmt.Errorf("unknown role %q: want all, sessions or approvals", s)
}

func (r Role) String() string {
	if r == RoleAll {
		return "all"
	}
	return string(r)
}

// ErrForbidden is a request the tenant's credential may not make (its
// Role).
var ErrForbidden = errors.New("not allowed for this credential")

// MaySessions is nil when t may make, use and end sessions; otherwise it
// says why not (ErrForbidden).
func (t Tenant) MaySessions() error {
	if t.Role == RoleApprovals {
		return fmt.Errorf("%w: this token may only see and answer approvals", ErrForbidden)
	}
	return nil
}

// MayApprovals is nil when t may see and answer approvals; otherwise it
// says why not (ErrForbidden).
func (t Tenant) MayApprovals() error {
	if t.Role == RoleSessions {
		return fmt.Errorf("%w: this token may use sessions but not see or answer their approvals (a token of role approvals does)", ErrForbidden)
	}
	return nil
}

// UIDTenant is the local user uid.
func UIDTenant(uid int) Tenant { return Tenant{ID: "uid:" + strconv.Itoa(uid), UID: uid} }

// TokenTenant is the tenant a bearer token names.
func TokenTenant(name string) Tenant { return Tenant{ID: "token:" + name, UID: -1} }

// TokenTenantRole is the tenant a bearer token names, limited to role.
func TokenTenantRole(name string, role Role) Tenant {
	t := TokenTenant(name)
	t.Role = role
	return t
}

// self says whether t is the user the daemon runs as, who could run any
// sandbox itself and so may ask for any policy.
func (t Tenant) self() bool { return t.UID >= 0 && t.UID == os.Geteuid() }

// checkWorkspace resolves a workspace the tenant names and refuses one it
// may not use: a token's tenant has no host identity, so only a workspace
// the daemon makes; a local user, a directory it owns (or, for the
// daemon's own user, one it can write). The text of every error is safe
// to show the tenant: it names only the path the tenant gave.
func checkWorkspace(t Tenant, path string) (string, *os.File, error) {
	if t.UID < 0 {
		return "", nil, fmt.Errorf("%w: a token's tenant can only use a workspace the daemon makes (leave workspace empty; moat session create --temp)", ErrWorkspace)
	}
	if !filepath.IsAbs(path) {
		return "", nil, fmt.Errorf("%w: %q is not an absolute path", ErrWorkspace, path)
	}
	if !t.self() && os.Geteuid() != 0 {
		// Only root can check, on what it mounts, that a path still
		// leads to the tenant's files (backend.Mount.Owner); a daemon of
		// an ordinary user would mount whatever the path leads to then,
		// its own files included. (Its sandboxes could not write another
		// user's files anyway: they are not mapped.)
		return "", nil, fmt.Errorf("%w: a daemon that does not run as root gives other users only a workspace it makes (leave workspace empty)", ErrWorkspace)
	}
	if t.self() {
		return openWorkspace(t, path)
	}
	// As root, the path is resolved and opened with the tenant's rights
	// (fsid), not the daemon's: a path the tenant could not reach itself
	// (in another user's closed directory, say) is refused as a missing
	// one is, with the same error, whatever is there; what the tenant
	// can reach, it could check itself. The directory opened is then the
	// one the tenant reached.
	var real string
	var root *os.File
	var err error
	gid, groups := t.fsIDs()
	if derr := fsid.Do(t.UID, gid, groups, func() { real, root, err = openWorkspace(t, path) }); derr != nil {
		return "", nil, fmt.Errorf("%w: %q: %v", ErrWorkspace, path, derr)
	}
	return real, root, err
}

// openWorkspace resolves and opens the workspace path names for t, with
// the rights of the thread it runs on, and checks it (see checkWorkspace).
// A path that does not resolve, whatever the reason, is one error: the
// tenant is told no more about a path it cannot reach than about a
// missing one.
func openWorkspace(t Tenant, path string) (string, *os.File, error) {
	real, err := resolveOutsideProc(path)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %q does not exist or is not reachable by uid %d", ErrWorkspace, path, t.UID)
	}
	// The checks are made on the directory opened, which the session then
	// keeps: what is checked is what the files API serves.
	root, err := os.Open(real)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %q cannot be opened", ErrWorkspace, path)
	}
	fi, err := root.Stat()
	if err != nil || !fi.IsDir() {
		root.Close()
		return "", nil, fmt.Errorf("%w: %q is not a directory", ErrWorkspace, path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case ok && int(st.Uid) == t.UID:
	case t.self() && unix.Access(real, unix.W_OK) == nil:
	default:
		root.Close()
		return "", nil, fmt.Errorf("%w: %q is not owned by uid %d", ErrWorkspace, path, t.UID)
	}
	if !t.self() {
		if err := fixedAncestors(real); err != nil {
			root.Close()
			return "", nil, fmt.Errorf("%w: %q: %v", ErrWorkspace, path, err)
		}
	}
	return real, root, nil
}

// resolveOutsideProc is filepath.EvalSymlinks of the absolute path p,
// refusing (as a path that does not resolve) one that passes through
// /proc on the way, by its own name or a link's: resolved on the
// daemon's thread, /proc/self is the daemon, and the links of its fds
// (/proc/self/fd/N, /dev/fd/N) lead where the daemon's files are, which
// the errors of the checks after it told apart for a tenant that may
// not list them (found by a tester). No workspace lies in /proc.
func resolveOutsideProc(p string) (string, error) {
	visits, real, ok := pathwalk.Walk(filepath.Clean(p))
	for _, v := range visits {
		if v == "/proc" || strings.HasPrefix(v, "/proc/") {
			return "", errors.New("a path through /proc")
		}
	}
	if !ok {
		return "", errors.New("does not resolve")
	}
	return real, nil
}

// fsIDs are the group and supplementary groups a local tenant's paths
// are resolved with (fsid): as the user database has them (its primary
// group, and the groups that list it), so that what the tenant reaches
// through a group it reaches here too. With no entry there, the overflow
// group (65534, "nogroup"), which grants nothing of its own, and no
// supplementary group.
func (t Tenant) fsIDs() (gid int, groups []int) {
	u, err := user.LookupId(strconv.Itoa(t.UID))
	if err != nil {
		return 65534, nil
	}
	gid, err = strconv.Atoi(u.Gid)
	if err != nil {
		gid = 65534
	}
	ids, _ := u.GroupIds()
	for _, s := range ids {
		if g, err := strconv.Atoi(s); err == nil && g >= 0 {
			groups = append(groups, g)
		}
	}
	return gid, groups
}

// fixedAncestors refuses a workspace that its tenant could move or
// replace by a link after the check: the daemon makes the session from
// the workspace's path (the sandbox's mounts, an overlay's lower layer, a
// copy), so a tenant that can rename a directory on the way, the
// workspace itself included, could have the daemon (maybe root) use a
// directory of someone else's. Every directory above the workspace must
// belong to root or the daemon's user and be writable by no one else; or
// be sticky (/tmp), where only the owner of an entry renames it, with the
// entry on the path not the tenant's: a tenant's own directory right in
// /tmp is refused, as it can rename it. (The mounts also check the owner
// of what they mount, backend.Mount.Owner; a copy is read by path.)
func fixedAncestors(real string) error {
	me := uint32(os.Geteuid())
	fixedOwner := func(uid uint32) bool { return uid == 0 || uid == me }
	child := real
	for d := filepath.Dir(real); ; child, d = d, filepath.Dir(d) {
		var st, cst unix.Stat_t
		if unix.Lstat(d, &st) != nil || unix.Lstat(child, &cst) != nil {
			return fmt.Errorf("cannot check %s", d)
		}
		closed := fixedOwner(st.Uid) && st.Mode&0o022 == 0
		sticky := fixedOwner(st.Uid) && st.Mode&unix.S_ISVTX != 0 && fixedOwner(cst.Uid)
		if !closed && !sticky {
			return fmt.Errorf("a directory above it (%s) could be renamed or replaced by another user after the check; use a workspace under directories only root or the daemon can change, or an empty one", d)
		}
		if d == "/" {
			return nil
		}
	}
}

// tenantPolicy parses the tenant's policy document, TOML or JSON (the
// default policy when empty), points it at the workspace and validates it. Errors about
// the document are *policy.Errors, located by line in "policy".
//
// A tenant other than the daemon's own user may not widen the sandbox
// beyond what it owns: writable paths only inside the workspace, readable
// ones inside it or the default system directories, the built-in
// system-call profiles, the default host identity, no secrets; a token's
// tenant neither the host network nor private addresses. The daemon's files are
// not the tenant's, and the daemon may be root.
//
// checked, for the daemon's own user's document read from file, is that
// document as its trust check returned it (CreateRequest.Checked).
func tenantPolicy(t Tenant, doc, file, ws, mode string, checked *policy.Policy) (*policy.Policy, error) {
	if checked != nil && (doc == "" || file == "" || !t.self() || !filepath.IsAbs(file)) {
		return nil, fmt.Errorf("%w: a checked policy comes with its document and file, from the daemon's own user", ErrBadRequest)
	}
	if file != "" && !filepath.IsAbs(file) {
		// Relative to what? Not the daemon's directory: refused rather
		// than read as a name alone.
		return nil, fmt.Errorf("%w: policy_file %q must be an absolute path (the file the policy was read from)", ErrBadRequest, file)
	}
	p := policy.Default()
	if doc != "" {
		// A policy the daemon's own user read from a file is that file's,
		// as for moat run: its relative paths are the file's directory's,
		// and the file and those it names are kept read-only
		// (policy.HostFiles). Another tenant's file is not looked at: its
		// policy may name no host program, and the daemon has no
		// business resolving paths on its behalf.
		name := "policy"
		if file != "" && t.self() && filepath.IsAbs(file) {
			name = filepath.Clean(file)
		}
		var err error
		if p, err = policy.ParseDocument(name, []byte(doc)); err != nil {
			return nil, err
		}
		if checked != nil {
			if err := p.KeepChecks(checked, []byte(doc)); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
			}
		}
		if pp := p.Workspace.Path; pp != policy.Default().Workspace.Path && !sameDir(pp, name, ws) {
			return nil, fmt.Errorf("%w: workspace.path %q is not the session's workspace %s: the request names the workspace (--workspace); remove workspace.path from the policy or name that directory", ErrPolicyRefused, pp, ws)
		}
	}
	p.Workspace.Path = ws
	if mode != "" {
		p.Workspace.Mode = mode
	}
	if err := p.ResolveAndValidate(ws, ""); err != nil {
		return nil, err
	}
	if !t.self() {
		if err := confine(p, ws, t); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func confine(p *policy.Policy, ws string, t Tenant) error {
	remote := t.UID < 0
	var errs []error
	refuse := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrPolicyRefused}, args...)...))
	}
	under := func(path, dir string) bool {
		return path == dir || strings.HasPrefix(path, dir+"/")
	}
	system := policy.Default().Filesystem.ReadOnly
	for _, f := range p.Filesystem.ReadWrite {
		if !under(f, ws) {
			refuse("filesystem.read_write: %q is outside the workspace", f)
		}
	}
	for _, f := range p.Filesystem.ReadOnly {
		ok := under(f, ws)
		for _, s := range system {
			ok = ok || under(f, s)
		}
		if !ok {
			refuse("filesystem.read_only: %q is neither in the workspace nor a system directory", f)
		}
	}
	switch p.Syscalls.Profile {
	case policy.ProfileDefault, policy.ProfileStrict:
	default:
		refuse("syscalls.profile: only %q and %q are allowed", policy.ProfileDefault, policy.ProfileStrict)
	}
	d := policy.Default().User
	if p.User.HostUID != d.HostUID || p.User.HostGID != d.HostGID {
		refuse("user.host_uid and user.host_gid keep their defaults")
	}
	// runsc maps no ids: under gVisor the command's uid and gid are host
	// identities over every file bound in, so a tenant's choice of them
	// would be a choice of whose files to read. A local user may be
	// itself; the rest keep the defaults, the daemon's choice.
	if p.Sandbox.Isolation == policy.IsolationGVisor && (p.User.UID != d.UID || p.User.GID != d.GID) {
		own := false
		if !remote {
			gid, _ := t.fsIDs()
			own = p.User.UID == t.UID && p.User.GID == gid
		}
		if !own {
			refuse("user.uid and user.gid keep their defaults (%d:%d) under gVisor, which maps no ids: they would be host identities over the files bound in", d.UID, d.GID)
		}
	}
	// env.pass copies the daemon's own environment into the sandbox,
	// which may hold the daemon's credentials: only the default names.
	for _, e := range p.Env.Pass {
		if !slices.Contains(policy.Default().Env.Pass, e) {
			refuse("env.pass: %q would pass the daemon's environment; set values with env.set", e)
		}
	}
	if p.Sandbox.Runsc != "" {
		// A binary the daemon, perhaps root, would run.
		refuse("sandbox.runsc names a program the daemon runs; the daemon's own choice holds")
	}
	if len(p.Secrets) > 0 {
		// Their values are read from the daemon's environment and files.
		refuse("[[secrets]] come from the daemon's environment and files, not a tenant's")
	}
	// A token's tenant is not a local user: the host's own network,
	// loopback services included, and private addresses are not its.
	if remote && p.Network.Mode == policy.NetworkHost {
		refuse("network.mode \"host\" is for local users")
	}
	if remote && len(p.Network.AllowCIDRs) > 0 {
		refuse("network.allow_cidrs is for local users")
	}
	return errors.Join(errs...)
}

// sameDir says whether the policy's workspace.path pp, in the document
// named name (an absolute file's relative paths are its directory's;
// "policy" has none), is the directory ws.
func sameDir(pp, name, ws string) bool {
	if !filepath.IsAbs(pp) {
		if !filepath.IsAbs(name) {
			return false
		}
		pp = filepath.Join(filepath.Dir(name), pp)
	}
	return filepath.Clean(pp) == filepath.Clean(ws)
}
