package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/fsid"
)

// openTrees prepares every bind source as a detached mount tree, for a
// caller that is root on the host.
//
// Why: when moat runs as root, the command (and init) run as a dedicated
// unprivileged host uid, which cannot even traverse a private directory
// such as /root on its way to the workspace. Root opens the trees here
// instead (open_tree with OPEN_TREE_CLONE) and init moves them into place.
// A tree marked IDMap is also id-mapped (mount_setattr MOUNT_ATTR_IDMAP):
// files owned by the source's owner appear owned by the sandbox user, and
// what the command creates lands owned by that owner on the host, while
// the command's own identity stays unprivileged for every other kernel
// check (sysctls, signals, set-id bits). Idmapped mounts are the kernel's
// mechanism for exactly this; the alternative, chown-ing files after the
// run, would race with the command and touch the user's tree.
//
// An optional mount whose source is missing is left out of spec, which
// the caller owns (see dropMounts); the trees are keyed by the indices of
// the mounts that remain.
func openTrees(spec *backend.Spec) (map[string]*os.File, []idmap, error) {
	trees := map[string]*os.File{}
	// The sources opened with a user's rights are opened first, all of
	// one identity on one thread (fsid.Do makes one per call), and used
	// in order below.
	pre := openAsUsers(spec.Mounts)
	closeAll := func() {
		for _, f := range trees {
			f.Close()
		}
		for _, o := range pre {
			if o.err == nil {
				unix.Close(o.fd)
			}
		}
	}
	var maps []idmap
	var skipped []int
	for i, m := range spec.Mounts {
		if m.Kind != backend.MountBind && m.Kind != backend.MountOverlay {
			continue
		}
		key := fmt.Sprint(i)
		if m.Kind == backend.MountOverlay {
			// The command's host uid must own the layers it writes, and
			// pass through the (root-owned) directory holding them.
			if err := os.Chmod(m.Layers, 0o711); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("overlay layers: %w", err)
			}
			for _, d := range []string{"upper", "work"} {
				p := filepath.Join(m.Layers, d)
				if err := os.Lchown(p, spec.User.HostUID, spec.User.HostGID); err != nil {
					closeAll()
					return nil, nil, fmt.Errorf("overlay layers: %w", err)
				}
			}
			fd, err := unix.OpenTree(unix.AT_FDCWD, m.Layers, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
			if err != nil {
				closeAll()
				return nil, nil, &backend.InitError{Stage: "overlay " + m.Target, Err: fmt.Errorf("open layers %s: %w", m.Layers, err)}
			}
			trees[key+"/layers"] = os.NewFile(uintptr(fd), m.Layers)
		}
		var fd int
		var err error
		if o, ok := pre[i]; ok {
			fd, err = o.fd, o.err
			delete(pre, i)
		} else {
			fd, err = unix.OpenTree(unix.AT_FDCWD, m.Source, treeFlags(m))
		}
		if err != nil {
			var en unix.Errno
			if m.Optional && (err == unix.ENOENT || m.OpenUID > 0 && errors.As(err, &en) && unreachable(en)) {
				// Not there, or (for the user who named it) not
				// reachable, which is the same to it.
				skipped = append(skipped, i)
				continue
			}
			closeAll()
			what := m.Source
			if m.Owner > 0 || m.OpenUID > 0 {
				what = m.Target // the path its caller named, not where it led
			}
			var errno unix.Errno
			if !errors.As(err, &errno) {
				return nil, nil, &backend.InitError{Stage: "bind " + what, Err: fmt.Errorf("open mount tree: %w", err)}
			}
			if m.OpenUID > 0 && unreachable(errno) {
				// Opened with the rights of the user who named it: a path
				// it cannot reach is as missing, with one error.
				return nil, nil, &backend.InitError{Stage: "bind " + what, Err: fmt.Errorf("%s does not exist or is not reachable by uid %d", m.Target, m.OpenUID), Errno: int(unix.ENOENT)}
			}
			if errno == unix.ENOENT {
				return nil, nil, &backend.InitError{Stage: "bind " + what, Err: &backend.GoneError{Path: m.Target}, Errno: int(errno)}
			}
			return nil, nil, &backend.InitError{Stage: "bind " + what, Err: fmt.Errorf("open mount tree: %w", err), Errno: int(errno)}
		}
		f := os.NewFile(uintptr(fd), m.Source)
		trees[key] = f
		if !m.IDMap && m.Owner <= 0 {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("stat %s: %w", m.Source, err)
		}
		if m.Owner > 0 && int(st.Uid) != m.Owner {
			// The tree opened is what is mounted: checked here, a link
			// swapped in after the caller's check is caught. The message
			// names the path the caller gave, not where it led.
			closeAll()
			return nil, nil, &backend.InitError{Stage: "bind " + m.Target, Err: fmt.Errorf("%s is not owned by uid %d, whose files alone this sandbox may map (was it replaced by a link?)", m.Target, m.Owner), Errno: int(unix.EPERM)}
		}
		if !m.IDMap {
			continue
		}
		if int(st.Uid) == spec.User.HostUID && int(st.Gid) == spec.User.HostGID {
			continue
		}
		maps = append(maps, idmap{tree: f, uid: int(st.Uid), gid: int(st.Gid)})
	}
	if len(skipped) > 0 {
		trees = dropMounts(spec, trees, skipped)
	}
	return trees, maps, nil
}

// dropMounts leaves the mounts at skip (ascending) out of spec, a copy
// its caller owns (a new Mounts slice: the old one is not written), and
// returns trees keyed by the mounts' new indices. A skipped mount must
// not reach the child as one without a tree: the child would look for
// its source again by path, with the sandbox user's rights, and a
// directory above it closed to that user would fail the run with EACCES
// where root found the source missing.
func dropMounts(spec *backend.Spec, trees map[string]*os.File, skip []int) map[string]*os.File {
	out := make(map[string]*os.File, len(trees))
	mounts := make([]backend.Mount, 0, len(spec.Mounts)-len(skip))
	for i, m := range spec.Mounts {
		key := strconv.Itoa(i)
		if len(skip) > 0 && skip[0] == i {
			skip = skip[1:]
			if f, ok := trees[key+"/layers"]; ok {
				f.Close()
			}
			continue
		}
		nk := strconv.Itoa(len(mounts))
		if f, ok := trees[key]; ok {
			out[nk] = f
		}
		if f, ok := trees[key+"/layers"]; ok {
			out[nk+"/layers"] = f
		}
		mounts = append(mounts, m)
	}
	spec.Mounts = mounts
	return out
}

// treeFlags are the open_tree flags for m's Source: a clone, recursive
// unless it is to be id-mapped (the kernel maps a single mount).
func treeFlags(m backend.Mount) uint {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
	if !m.IDMap {
		flags |= unix.AT_RECURSIVE
	}
	return flags
}

// doAs is fsid.Do; tests count its calls.
var doAs = fsid.Do

// opened is a tree opened ahead (openAsUsers): its fd, or why not.
type opened struct {
	fd  int
	err error
}

// openAsUsers opens the Sources of the binds and overlays of mounts that
// have an OpenUID as detached mount trees, with the filesystem rights of
// that user (fsid), so that each path is resolved as the user would
// resolve it: those of one identity (OpenUID, OpenGID, OpenGroups)
// together, on one thread. The result is by index in mounts.
func openAsUsers(mounts []backend.Mount) map[int]opened {
	type identity struct {
		uid, gid int
		groups   string
	}
	byID := map[identity][]int{}
	var order []identity
	for i, m := range mounts {
		if m.OpenUID <= 0 || m.Kind != backend.MountBind && m.Kind != backend.MountOverlay {
			continue
		}
		id := identity{m.OpenUID, m.OpenGID, fmt.Sprint(m.OpenGroups)}
		if _, ok := byID[id]; !ok {
			order = append(order, id)
		}
		byID[id] = append(byID[id], i)
	}
	out := map[int]opened{}
	for _, id := range order {
		idx := byID[id]
		first := mounts[idx[0]]
		res := make([]opened, len(idx))
		derr := doAs(first.OpenUID, first.OpenGID, first.OpenGroups, func() {
			for k, i := range idx {
				fd, err := unix.OpenTree(unix.AT_FDCWD, mounts[i].Source, treeFlags(mounts[i]))
				res[k] = opened{fd, err}
			}
		})
		for k, i := range idx {
			if derr != nil {
				out[i] = opened{-1, derr}
				continue
			}
			out[i] = res[k]
		}
	}
	return out
}

// unreachable says whether errno, from resolving a path, is one of the
// answers that tell a missing path from one the caller may not look in
// (or a file from a directory on the way): all are one to a user asking
// about a path it named.
func unreachable(errno unix.Errno) bool {
	switch errno {
	case unix.ENOENT, unix.EACCES, unix.ENOTDIR, unix.ELOOP, unix.ENAMETOOLONG:
		return true
	}
	return false
}

// ownersUnchecked refuses a Spec with a Mount.Owner where the trees are
// not opened on the host (not root), and so the owner cannot be checked
// on what is mounted.
func ownersUnchecked(spec *backend.Spec) error {
	for _, m := range spec.Mounts {
		if m.Owner > 0 {
			return fmt.Errorf("the owner of %s cannot be checked on what is mounted unless moat runs as root", m.Target)
		}
		if m.OpenUID > 0 && m.OpenUID != os.Geteuid() {
			return fmt.Errorf("%s cannot be opened with the rights of uid %d unless moat runs as root", m.Target, m.OpenUID)
		}
	}
	return nil
}

// CheckIDMap tells a root caller whether a workspace at dir could be
// id-mapped to hostUID:hostGID the way a run maps it (see openTrees),
// without mounting anything: the tree is opened detached, mapped, and
// closed. It returns the error such a run would be refused with, or nil.
// moat doctor asks it; it needs CAP_SYS_ADMIN.
func CheckIDMap(dir string, hostUID, hostGID int) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open mount tree %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if int(st.Uid) == hostUID && int(st.Gid) == hostGID {
		return nil // a run maps nothing here
	}
	spec := &backend.Spec{User: backend.Identity{HostUID: hostUID, HostGID: hostGID}}
	return applyIDMaps(spec, []idmap{{tree: f, uid: int(st.Uid), gid: int(st.Gid)}}, onStartThread)
}

// idmap is a tree still to be id-mapped: files owned by uid:gid are to
// appear owned by the sandbox user.
type idmap struct {
	tree     *os.File
	uid, gid int
}

// applyIDMaps id-maps the trees openTrees left to map. It may run after
// init has started with the trees as inherited fds (the fds name the same
// detached mounts), as long as it is before init reads the Spec and moves
// them into place: the host does it while init's runtime starts, since
// getting a user namespace for the mapping costs a fork and an exec.
// onParent starts the user namespaces' holders (see idmapUserns).
func applyIDMaps(spec *backend.Spec, maps []idmap, onParent func(func())) error {
	userns := map[[2]int]*os.File{}
	defer func() {
		for _, f := range userns {
			f.Close()
		}
	}()
	for _, m := range maps {
		owner := [2]int{m.uid, m.gid}
		ns := userns[owner]
		if ns == nil {
			var err error
			ns, err = idmapUserns(m.uid, m.gid, spec.User.HostUID, spec.User.HostGID, onParent)
			if err != nil {
				return fmt.Errorf("id-map %s: %w", m.tree.Name(), err)
			}
			userns[owner] = ns
		}
		if err := mapTree(m, ns, spec); err != nil {
			return err
		}
	}
	return nil
}

// mapTree id-maps m's tree with the user namespace ns, which maps the
// tree's owner to the sandbox user's host ids.
func mapTree(m idmap, ns *os.File, spec *backend.Spec) error {
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(int(m.tree.Fd()), "", unix.AT_EMPTY_PATH, &attr); err != nil {
		if idmappedMount(m.tree.Name()) {
			return fmt.Errorf("%s is on a mount that is id-mapped already (by a container runtime, say), and the kernel does not map a mount twice. Run as root, moat shows writable paths to the command through idmapped mounts: run moat as an ordinary user here, or give it the directory through a mount without a mapping: %w",
				m.tree.Name(), errors.ErrUnsupported)
		}
		if err == unix.EINVAL {
			return unmappable(m.tree)
		}
		return fmt.Errorf("id-map %s (owner %d:%d -> %d:%d): %w", m.tree.Name(), m.uid, m.gid, spec.User.HostUID, spec.User.HostGID, err)
	}
	return nil
}

// nestable reports whether a direct start can id-map the trees with
// init's own user namespace instead of a holder's (idmapUserns): when they
// all have one owner, and an unprivileged process may use a user
// namespace it creates.
//
// Init's user namespace then maps that owner (not the sandbox user) to
// the sandbox user's host ids, the host maps the trees with it as soon as
// init's maps are written, and init, once it has done all that needs its
// capabilities there (mounts, pivot_root, the hostname, the proxy's
// listener), moves itself into a user namespace of its own making, nested
// in the first, that maps the sandbox user to the owner (enterCommandUserns
// in the plan). The command starts there. Its host ids are the same as
// with a holder, and so is everything the kernel checks against them; what
// a holder costs is not paid (a clone, its maps, its exit: ~0.1 ms of a
// start as root, bench/abtime). Trees of several owners need a namespace
// per owner, and take holders.
//
// usernsRestricted: Ubuntu's AppArmor (kernel.apparmor_restrict_unprivileged_userns)
// lets an unprivileged process create a user namespace but denies it
// every capability there, and init, unprivileged on the host, needs one
// to write its nested namespace's maps: such hosts take holders, which
// moat (root) makes.
func nestable(maps []idmap) bool {
	if len(maps) == 0 || usernsRestricted() {
		return false
	}
	for _, m := range maps[1:] {
		if m.uid != maps[0].uid || m.gid != maps[0].gid {
			return false
		}
	}
	return true
}

// usernsRestricted reports whether AppArmor restricts the user namespaces
// unprivileged processes create (see nestable). Tests replace it.
var usernsRestricted = func() bool {
	b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	return err == nil && strings.TrimSpace(string(b)) != "0"
}

// unmappable explains mount_setattr's EINVAL for a tree whose filesystem
// the kernel cannot id-map (tmpfs before Linux 6.3, NFS, FUSE, ...). There
// is no safe way on: without the mapping the command could not write the
// tree, and running it as the tree's owner would make it host root.
func unmappable(tree *os.File) error {
	fs := "a filesystem"
	var st unix.Statfs_t
	if unix.Fstatfs(int(tree.Fd()), &st) == nil {
		fs = fmt.Sprintf("a filesystem of type %#x", uint64(st.Type))
		if name, ok := fsNames()[int64(st.Type)]; ok {
			fs = name
		}
	}
	var u unix.Utsname
	unix.Uname(&u)
	return fmt.Errorf("%s is on %s, which this kernel (Linux %s) cannot id-map. Run as root, moat shows writable paths to the command through idmapped mounts, so that the command stays an unprivileged host user: keep the workspace and --rw paths on a filesystem that supports them (ext4, xfs, btrfs; tmpfs from Linux 6.3 on), or run moat as an ordinary user: %w",
		tree.Name(), fs, unix.ByteSliceToString(u.Release[:]), errors.ErrUnsupported)
}

// idmappedMount reports whether path is on an idmapped mount, which
// /proc/self/mountinfo marks with the per-mount option "idmapped".
func idmappedMount(path string) bool {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_STATX_SYNC_AS_STAT, unix.STATX_MNT_ID, &stx); err != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return false
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	id := strconv.FormatUint(stx.Mnt_id, 10)
	for _, line := range strings.Split(string(b), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ...
		f := strings.Fields(line)
		if len(f) > 5 && f[0] == id {
			return slices.Contains(strings.Split(f[5], ","), "idmapped")
		}
	}
	return false
}

// fsNames names the filesystems a workspace is commonly on.
var fsNames = sync.OnceValue(func() map[int64]string {
	return map[int64]string{
		unix.TMPFS_MAGIC: "tmpfs", unix.EXT4_SUPER_MAGIC: "ext4", unix.XFS_SUPER_MAGIC: "xfs",
		unix.BTRFS_SUPER_MAGIC: "btrfs", unix.OVERLAYFS_SUPER_MAGIC: "overlayfs",
		unix.NFS_SUPER_MAGIC: "NFS", unix.FUSE_SUPER_MAGIC: "FUSE", unix.V9FS_MAGIC: "9p",
		unix.CIFS_SUPER_MAGIC: "CIFS", unix.SMB2_SUPER_MAGIC: "SMB", 0x2fc12fc1: "ZFS",
	}
})

// idmapUserns returns a user namespace that maps uid:gid to hostUID:hostGID,
// for an idmapped mount. A user namespace is only reachable through a
// process in it, and Go cannot unshare one in a multithreaded process, so
// a short-lived child is started in it and its namespace kept by fd.
//
// On amd64 the child is a clone that shares this process's memory and
// only waits to be killed (holdUsernsVM): no exec at all. Elsewhere, the
// child asks to be traced (PTRACE_TRACEME), so the kernel stops it
// with SIGTRAP at its exec, before the new image runs a single
// instruction: the run pays for a fork and an exec, not for a second Go
// runtime starting up on a CPU the sandbox needs (about a millisecond
// here). Where tracing is refused (Yama's ptrace_scope 3, an LSM), the
// child runs this binary as moat-userns-holder instead, which waits to be
// killed. Either way it is killed as soon as the namespace is open.
//
// onParent runs the start of the child on a thread that outlives it (see
// onStartThread): the child dies with the thread that started it.
func idmapUserns(uid, gid, hostUID, hostGID int, onParent func(func())) (*os.File, error) {
	if shareVM {
		return holdUsernsVM(uid, gid, hostUID, hostGID, onParent)
	}
	var f *os.File
	var err error
	onParent(func() {
		f, err = holdUserns(uid, gid, hostUID, hostGID, true)
		if err != nil {
			f, err = holdUserns(uid, gid, hostUID, hostGID, false)
		}
	})
	return f, err
}

func holdUserns(uid, gid, hostUID, hostGID int, stopped bool) (*os.File, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	pid, err := syscall.ForkExec("/proc/self/exe", []string{usernsArg0}, &syscall.ProcAttr{
		Env:   []string{},
		Files: []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd()},
		Sys: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: hostUID, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: hostGID, Size: 1}},
			Pdeathsig:   syscall.SIGKILL,
			Ptrace:      stopped,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("start user namespace holder: %w", err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	// SIGKILL ends a traced, stopped process too.
	syscall.Kill(pid, syscall.SIGKILL)
	// Reaping waits for the kernel to tear the process down; the run
	// does not need to wait for that.
	go func() {
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}()
	if err != nil {
		return nil, fmt.Errorf("open user namespace: %w", err)
	}
	return f, nil
}
