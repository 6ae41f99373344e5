package gvisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/fsid"
	"github.com/moatbox/moat/internal/seccomp"
)

// ErrUnsupported is wrapped by the errors of a Spec this backend cannot
// enforce; the message names each protection and what to change.
var ErrUnsupported = errors.New("not supported by the gvisor backend")

// Unsupported lists what spec asks for that this backend cannot enforce
// here, one line each; empty means it can run spec. Run refuses a Spec
// with any; the sandbox package asks first, to refuse the run by name.
func (b *Backend) Unsupported(spec *backend.Spec) []string {
	out := unsupported(spec)
	if b.Runsc == "" {
		if _, err := Find(""); err != nil {
			out = append(out, err.Error())
		}
	}
	return out
}

func unsupported(spec *backend.Spec) []string {
	var out []string
	if os.Geteuid() != 0 {
		out = append(out, "a caller that is not root: rootless runsc has no network isolation of its own (run moat as root, or --isolation native)")
	}
	switch spec.Network.Mode {
	case backend.NetNone, backend.NetHost, backend.NetProxy, "":
	default:
		out = append(out, fmt.Sprintf("network mode %q", spec.Network.Mode))
	}
	if spec.Network.RestrictBind || spec.Network.RestrictConnect {
		out = append(out, "TCP port rules (network.tcp_bind, tcp_connect): they are Landlock's, and gVisor has no Landlock")
	}
	l := spec.Limits
	for _, c := range []struct {
		set  bool
		what string
	}{
		{l.Pids > 0, "process limit (limits.pids / --pids): the sandbox's processes are the sentry's, and a host cgroup would count the sentry's threads instead"},
		{l.DiskBytes > 0, "disk limit (limits.disk / --disk): gVisor's tmpfs is the sentry's memory, with no size of its own (limits.memory bounds it with the rest)"},
	} {
		if c.set {
			out = append(out, c.what)
		}
	}
	for _, m := range spec.Mounts {
		if m.Kind == backend.MountBind && m.IDMap && !m.ReadOnly || m.Kind == backend.MountOverlay && m.IDMap {
			// runsc has no id-mapped mounts: the command writes as its
			// own uid, so only a tree that uid owns is writable, and
			// what it makes there lands owned by that uid.
			var st syscall.Stat_t
			switch err := syscall.Stat(m.Source, &st); {
			case err != nil, int(st.Uid) == spec.User.UID:
			case st.Uid == 0:
				out = append(out, fmt.Sprintf("writable %s owned by root, and the command is never root: runsc has no id-mapped mounts (use a directory a user owns, or --isolation native)", m.Target))
			default:
				out = append(out, fmt.Sprintf("writable %s owned by uid %d while the command is uid %d: runsc has no id-mapped mounts (run with --uid %d, the owner's uid, or --isolation native)", m.Target, st.Uid, spec.User.UID, st.Uid))
			}
		}
	}
	// runsc maps no ids: the command's uid and gid are the host's own
	// for every file bound in (the native backend, as root, runs it as
	// user.host_uid and host_gid instead). An id of a host system account
	// would have that account's rights over the system directories (a
	// group that reads a shadow backup or TLS keys); an ordinary one is a
	// user's, as the workspace's owner is.
	uidMin, gidMin := firstOrdinaryIDs()
	for _, c := range []struct {
		field     string
		id, host  int
		first     int
		hostField string
	}{
		{"user.uid", spec.User.UID, spec.User.HostUID, uidMin, "user.host_uid"},
		{"user.gid", spec.User.GID, spec.User.HostGID, gidMin, "user.host_gid"},
	} {
		if c.id < c.first && c.id != c.host {
			out = append(out, fmt.Sprintf("%s %d, a system id on this host: runsc maps no ids, so the command would have host id %d's rights over the files bound in, not %s's (use an id from %d up, or --isolation native)", c.field, c.id, c.id, c.hostField, c.first))
		}
	}
	if len(spec.Seccomp) > 1 || spec.SeccompAtExec {
		out = append(out, "a custom seccomp profile: it is stacked on moat's floor, and runsc applies one filter (use the default or strict profile)")
	} else if len(spec.Seccomp) == 1 {
		if _, err := ociSeccomp(spec.Seccomp[0]); err != nil {
			out = append(out, fmt.Sprintf("the seccomp profile: %v", err))
		}
	}
	return out
}

// bundle writes the OCI bundle of spec into dir (config.json, rootfs/
// with the root's symlinks, files/ with the contents of MountFile
// operations) and returns the config. pin stages the sources of protected
// paths and pins, and watch is told the host path of each protection (see
// ociMounts).
func bundle(spec *backend.Spec, dir string, pin func(string) (string, error), watch func(string)) (*specs.Spec, error) {
	rootfs := filepath.Join(dir, "rootfs")
	files := filepath.Join(dir, "files")
	for _, d := range []string{rootfs, files} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	mounts, err := ociMounts(spec.Mounts, rootfs, files, pin, watch)
	if err != nil {
		return nil, err
	}
	c := &specs.Spec{
		Version:  specs.Version,
		Root:     &specs.Root{Path: rootfs, Readonly: true},
		Hostname: spec.Hostname,
		Mounts:   mounts,
		Process: &specs.Process{
			Args: spec.Args,
			Env:  spec.Env,
			Cwd:  spec.Dir,
			// No supplementary groups: the command has its own uid and
			// gid and nothing of the caller's.
			User: specs.User{UID: uint32(spec.User.UID), GID: uint32(spec.User.GID)},
			// Every capability set empty.
			Capabilities:    &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}},
			NoNewPrivileges: true,
			Rlimits:         rlimits(spec.Limits),
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
			},
		},
	}
	if spec.Network.Mode != backend.NetHost {
		c.Linux.Namespaces = append(c.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	if len(spec.Seccomp) == 1 {
		s, err := ociSeccomp(spec.Seccomp[0])
		if err != nil {
			return nil, err
		}
		c.Linux.Seccomp = s
	}
	return c, nil
}

func rlimits(l backend.Limits) []specs.POSIXRlimit {
	var out []specs.POSIXRlimit
	add := func(typ string, v uint64) {
		if v > 0 {
			out = append(out, specs.POSIXRlimit{Type: typ, Hard: v, Soft: v})
		}
	}
	// Whole seconds, rounded up, as the native backend sets it. The hard
	// limit is a second past the soft one, as there: the sentry, as
	// Linux, kills with SIGKILL at the hard limit before it sends SIGXCPU
	// at the soft one, and a run killed so would read as an ordinary
	// signal rather than its CPU limit (or budget).
	if cpu := uint64((l.CPUTime + time.Second - 1) / time.Second); cpu > 0 {
		out = append(out, specs.POSIXRlimit{Type: "RLIMIT_CPU", Soft: cpu, Hard: cpu + 1})
	}
	add("RLIMIT_NOFILE", l.OpenFiles)
	add("RLIMIT_FSIZE", l.FileSize)
	return out
}

// ociMounts turns the Spec's ordered mount operations into OCI mounts.
// The sentry makes missing mount points itself; a symlink of the root is
// made in rootfs, which is otherwise empty, and a MountFile's content is
// written under files and bound read-only.
//
// A protected path and a pin lie inside the workspace, which another
// sandbox of it may change while this one is set up, and runsc's gofer
// opens a bind's source by its path later, as root: a directory swapped
// for a link meanwhile bound the host's files the link led to (found by a
// tester). So each is bound from what pin returns for its host path: a
// name for the very file pin opened (and refused if it was a link), not
// the path.
func ociMounts(ms []backend.Mount, rootfs, files string, pin func(src string) (string, error), watch func(host string)) ([]specs.Mount, error) {
	if watch == nil {
		watch = func(string) {}
	}
	var out []specs.Mount
	// hostOf holds the host path of each staged bind of out, by index;
	// writable, the host paths bound writable so far.
	hostOf := map[int]string{}
	var writable []string
	// host finds what a sandbox path is on the host, from the binds made
	// so far: a read-only re-bind, a pin and a mask bind that again.
	host := func(target string) (src string, ok bool) {
		for i := len(out) - 1; i >= 0; i-- {
			m := out[i]
			rel, err := filepath.Rel(m.Destination, target)
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				continue
			}
			if m.Type != "bind" {
				return "", false // under a tmpfs or proc: not the host's
			}
			if h, ok := hostOf[i]; ok {
				return filepath.Join(h, rel), true // a staged pin: its host path
			}
			return filepath.Join(m.Source, rel), true
		}
		return "", false
	}
	for i, m := range ms {
		if m.Owner > 0 {
			// runsc opens the sources by path after moat is done with
			// them: the owner of what it mounts cannot be checked.
			return nil, fmt.Errorf("mount %s: under gvisor, a path another user named cannot be mounted safely (runsc resolves it later, and it could be swapped for a link meanwhile); use a workspace the daemon makes", m.Target)
		}
		switch m.Kind {
		case backend.MountBind:
			var err error
			stat := func() { _, err = os.Stat(m.Source) }
			asUser := m.OpenUID > 0 && m.OpenUID != os.Geteuid()
			if asUser {
				// Looked at with the rights of the user who named it: a
				// path it cannot reach is as missing to it. (runsc opens
				// it later by path; Owner refuses what a user could
				// swap, and a read-only system path is root's to move.)
				if derr := fsid.Do(m.OpenUID, m.OpenGID, m.OpenGroups, stat); derr != nil {
					return nil, fmt.Errorf("mount %s: %w", m.Target, derr)
				}
				if err != nil && !m.Optional {
					err = fmt.Errorf("%s does not exist or is not reachable by uid %d", m.Target, m.OpenUID)
				}
			} else {
				stat()
			}
			if err != nil {
				if m.Optional {
					continue
				}
				if errors.Is(err, fs.ErrNotExist) && !asUser {
					err = &backend.GoneError{Path: m.Target}
				}
				return nil, fmt.Errorf("mount %s: %w", m.Target, err)
			}
			src := m.Source
			if slices.ContainsFunc(writable, func(w string) bool { return under(w, m.Source) }) {
				// Inside what a sandbox may write (a --ro path in the
				// workspace): staged, as a protected path is.
				if src, err = pin(m.Source); err != nil {
					return nil, fmt.Errorf("mount %s: %w", m.Target, err)
				}
				hostOf[len(out)] = m.Source
				watch(m.Source)
			}
			if !m.ReadOnly {
				writable = append(writable, m.Source)
			}
			out = append(out, bind(src, m.Target, m.ReadOnly))
		case backend.MountTmpfs:
			opts := []string{"nosuid", "nodev"}
			if m.Options != "" {
				opts = append(opts, strings.Split(m.Options, ",")...)
			}
			out = append(out, specs.Mount{Destination: m.Target, Type: "tmpfs", Source: "tmpfs", Options: opts})
		case backend.MountSymlink:
			if _, under := host(m.Target); under || len(out) > 0 && coveredByAny(out, m.Target) {
				return nil, fmt.Errorf("symlink %s: its directory is a mount, not the root", m.Target)
			}
			p := filepath.Join(rootfs, m.Target)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			if err := os.Symlink(m.Source, p); err != nil {
				return nil, fmt.Errorf("symlink %s: %w", m.Target, err)
			}
		case backend.MountProc:
			out = append(out, specs.Mount{Destination: m.Target, Type: "proc", Source: "proc", Options: []string{"nosuid", "nodev", "noexec"}})
		case backend.MountDev:
			// runsc gives every sandbox its own /dev (null, zero, full,
			// random, urandom, tty, ptmx, pts, shm, fd links): the
			// sentry's devices, none of them the host's.
		case backend.MountFile:
			p := filepath.Join(files, fmt.Sprint(i))
			if err := os.WriteFile(p, []byte(m.Data), 0o444); err != nil {
				return nil, fmt.Errorf("file %s: %w", m.Target, err)
			}
			out = append(out, bind(p, m.Target, true))
		case backend.MountReadOnly, backend.MountPin:
			src, ok := host(m.Target)
			staged := ""
			var err error
			if ok {
				staged, err = pin(src)
			}
			if !ok || err != nil {
				if m.Optional && (!ok || errors.Is(err, fs.ErrNotExist)) {
					continue
				}
				if errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("protect %s: %w", m.Target, &backend.GoneError{Path: m.Target})
				}
				if err != nil {
					return nil, fmt.Errorf("protect %s: %w", m.Target, err)
				}
				return nil, fmt.Errorf("protect %s: not in the sandbox", m.Target)
			}
			hostOf[len(out)] = src
			watch(src)
			if m.Kind == backend.MountPin {
				writable = append(writable, src)
			}
			out = append(out, bind(staged, m.Target, m.Kind == backend.MountReadOnly))
		case backend.MountMask:
			// What is missing here is skipped only if optional. Once in
			// the bundle, a mask stays: runsc makes a missing mount
			// point itself (or fails), so a path removed after this
			// check is not left unhidden either.
			src, ok := host(m.Target)
			onHost := ok
			if !ok && sentryOwn(out, m.Target) {
				// What gVisor's kernel makes itself (its /proc, and the
				// /sys and /dev runsc gives every sandbox) has no host
				// source, yet is there to read: masked all the same,
				// a file or a directory as the host's like-named path
				// is (a mismatch fails the mount, and the run).
				src, ok = m.Target, true
			}
			if !ok {
				if m.Optional {
					continue // not in the sandbox at all
				}
				return nil, fmt.Errorf("mask %s: not in the sandbox", m.Target)
			}
			fi, err := os.Stat(src)
			if err != nil {
				if m.Optional {
					continue
				}
				if errors.Is(err, fs.ErrNotExist) {
					err = &backend.GoneError{Path: m.Target}
				}
				return nil, fmt.Errorf("mask %s: %w", m.Target, err)
			}
			if onHost {
				watch(src)
			}
			if fi.IsDir() {
				out = append(out, specs.Mount{Destination: m.Target, Type: "tmpfs", Source: "tmpfs", Options: []string{"ro", "nosuid", "nodev", "noexec", "mode=0555"}})
				continue
			}
			// A file: an empty one nobody can read.
			p := filepath.Join(files, fmt.Sprint(i))
			if err := os.WriteFile(p, nil, 0); err != nil {
				return nil, fmt.Errorf("mask %s: %w", m.Target, err)
			}
			out = append(out, bind(p, m.Target, true))
		case backend.MountOverlay:
			return nil, fmt.Errorf("%w: workspace mode overlay", ErrUnsupported)
		default:
			return nil, fmt.Errorf("mount %s: unknown kind %q", m.Target, m.Kind)
		}
	}
	return out, nil
}

// sentryDirs are what runsc mounts in every sandbox from gVisor's own
// kernel when the bundle does not mount them: its sysfs and its /dev.
var sentryDirs = []string{"/sys", "/dev"}

// sentryOwn reports whether target, in a sandbox of the mounts ms, is in
// a filesystem gVisor's kernel makes itself: under a proc mount of ms, or
// under sentryDirs with no mount of ms covering it.
func sentryOwn(ms []specs.Mount, target string) bool {
	for i := len(ms) - 1; i >= 0; i-- {
		if under(ms[i].Destination, target) {
			return ms[i].Type == "proc"
		}
	}
	for _, d := range sentryDirs {
		if under(d, target) {
			return true
		}
	}
	return false
}

// under reports whether target is dir or below it.
func under(dir, target string) bool {
	rel, err := filepath.Rel(dir, target)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// coveredByAny reports whether a mount of ms has target at or below its
// destination.
func coveredByAny(ms []specs.Mount, target string) bool {
	for _, m := range ms {
		rel, err := filepath.Rel(m.Destination, target)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}

func bind(src, dst string, ro bool) specs.Mount {
	opts := []string{"rbind", "nosuid", "nodev"}
	if ro {
		opts = append(opts, "ro")
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: opts}
}

// ociSeccomp turns a moat profile into runsc's OCI seccomp filter, which
// the sentry runs on the command's system calls. runsc gives every
// SCMP_ACT_ERRNO rule EPERM whatever errno it names, so a rule that
// answers ENOSYS (libc's cue to fall back to an older call) becomes
// SCMP_ACT_TRACE, which answers ENOSYS when no tracer is attached: the
// profile must refuse ptrace outright for that to hold. SCMP_ACT_KILL
// is the only kill runsc has: it ends the calling thread.
func ociSeccomp(p *seccomp.Profile) (*specs.LinuxSeccomp, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	denies := func(name string) bool {
		for _, r := range p.Rules {
			for _, n := range r.Names {
				if n == name && len(r.Args) == 0 && r.Action == seccomp.Errno {
					return true
				}
			}
		}
		return false
	}
	action := func(a seccomp.Action, errno uint32) (specs.LinuxSeccompAction, error) {
		switch a {
		case seccomp.Allow:
			return specs.ActAllow, nil
		case seccomp.Errno:
			switch syscall.Errno(errno) {
			case 0, syscall.EPERM:
				return specs.ActErrno, nil
			case syscall.ENOSYS:
				if !denies("ptrace") {
					return "", errors.New("an ENOSYS answer needs ptrace refused under runsc")
				}
				return specs.ActTrace, nil
			}
			return "", fmt.Errorf("runsc answers EPERM to every refused call, and the profile asks for %v", syscall.Errno(errno))
		case seccomp.KillProcess, seccomp.KillThread:
			return specs.ActKill, nil
		case seccomp.Trap:
			return specs.ActTrap, nil
		}
		return "", fmt.Errorf("action %v has no runsc equivalent", a)
	}
	def, err := action(p.DefaultAction, p.DefaultErrno)
	if err != nil {
		return nil, fmt.Errorf("default action: %w", err)
	}
	out := &specs.LinuxSeccomp{DefaultAction: def}
	for _, a := range p.Arches {
		switch a {
		case seccomp.ArchX86_64:
			out.Architectures = append(out.Architectures, specs.ArchX86_64)
		case seccomp.ArchAarch64:
			out.Architectures = append(out.Architectures, specs.ArchAARCH64)
		}
	}
	ops := map[seccomp.Op]specs.LinuxSeccompOperator{
		seccomp.NE: specs.OpNotEqual, seccomp.LT: specs.OpLessThan, seccomp.LE: specs.OpLessEqual,
		seccomp.EQ: specs.OpEqualTo, seccomp.GE: specs.OpGreaterEqual, seccomp.GT: specs.OpGreaterThan,
		seccomp.MaskedEQ: specs.OpMaskedEqual,
	}
	for _, r := range p.Rules {
		act, err := action(r.Action, r.Errno)
		if err != nil {
			return nil, fmt.Errorf("rule for %s: %w", strings.Join(r.Names, ", "), err)
		}
		sc := specs.LinuxSyscall{Names: r.Names, Action: act}
		for _, a := range r.Args {
			// runsc reads several conditions on one argument as
			// alternatives, where moat's rules need all of them.
			for _, b := range sc.Args {
				if b.Index == a.Index {
					return nil, fmt.Errorf("rule for %s: two conditions on argument %d, which runsc would read as either", strings.Join(r.Names, ", "), a.Index)
				}
			}
			// runsc's MaskedEqual is (arg & Value) == ValueTwo, as moat's.
			sc.Args = append(sc.Args, specs.LinuxSeccompArg{Index: a.Index, Value: a.Value, ValueTwo: a.ValueTwo, Op: ops[a.Op]})
		}
		out.Syscalls = append(out.Syscalls, sc)
	}
	return out, nil
}

// firstOrdinaryIDs are the host's first uid and gid of ordinary
// accounts, from /etc/login.defs (UID_MIN, GID_MIN), 1000 where it says
// nothing: below them are the system's own accounts and groups.
func firstOrdinaryIDs() (uid, gid int) {
	uid, gid = 1000, 1000
	data, err := os.ReadFile("/etc/login.defs")
	if err != nil {
		return uid, gid
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil || n <= 0 {
			continue
		}
		switch f[0] {
		case "UID_MIN":
			uid = n
		case "GID_MIN":
			gid = n
		}
	}
	return uid, gid
}
