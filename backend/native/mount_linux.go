package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
)

func ptr[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// Paths inside the intermediate root that init builds on (see buildRoot).
const (
	oldRoot  = "/oldroot" // the host's root, the source of every bind
	newRoot  = "/newroot" // the sandbox's root while it is built
	maskFile = "/mask"    // an empty mode-0 file bound over denied files
)

// buildRoot builds the sandbox's file system and makes it the root, the
// way bubblewrap does: a private tmpfs becomes a temporary root with the
// host's root moved under it at /oldroot, so that every bind source is
// reachable by path (even one under /tmp, which the sandbox's own /tmp
// would otherwise hide); the sandbox's root is assembled on a second tmpfs
// at /newroot from the Spec's ordered operations; then a final
// pivot_root makes /newroot the root and the old root is detached, so no
// path leads back to the host's tree.
func buildRoot(spec *backend.Spec, trees map[string]int) error {
	// Nothing done here may propagate back to the host's mounts.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("make mounts private", err)
	}
	base := "/tmp"
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, baseTmpfsOptions(spec)); err != nil {
		return fail("mount base tmpfs", err)
	}
	for _, d := range []string{base + oldRoot, base + newRoot} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail("mkdir "+d, err)
		}
	}
	if err := os.WriteFile(base+maskFile, nil, 0); err != nil {
		return fail("create mask file", err)
	}
	if err := unix.PivotRoot(base, base+oldRoot); err != nil {
		return fail("pivot_root to base", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fail("chdir /", err)
	}
	// The mask file gets a read-only mount of its own, once: a bind mount
	// copies its source mount's flags, so each mask below is one mount
	// call instead of a mount and a mount_setattr.
	if err := unix.Mount(maskFile, maskFile, "", unix.MS_BIND, ""); err != nil {
		return fail("mask file", err)
	}
	if err := setAttr(maskFile, maskAttrs, false, "mask file"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fail("mount root tmpfs", err)
	}
	if spec.Limits.DiskBytes > 0 {
		if err := mountScratch(spec.Limits.DiskBytes); err != nil {
			return err
		}
	}

	for i, m := range spec.Mounts {
		if err := applyMount(i, m, trees); err != nil {
			return err
		}
	}
	if err := maskProc(spec); err != nil {
		return err
	}

	// The final pivot: /newroot becomes "/", and the temporary root (with
	// the host's root under it) is stacked on top and detached at once.
	if err := unix.Chdir(newRoot); err != nil {
		return fail("chdir new root", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fail("pivot_root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fail("detach old root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fail("chdir /", err)
	}
	// The root tmpfs only holds mount points and symlinks: read-only.
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fail("remount / read-only", err)
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/"
	}
	if err := unix.Chdir(dir); err != nil {
		return fail("chdir "+dir, err)
	}
	return nil
}

func applyMount(i int, m backend.Mount, trees map[string]int) error {
	target := newRoot + m.Target
	switch m.Kind {
	case backend.MountBind:
		return bindMount(i, m, target, trees)
	case backend.MountTmpfs:
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fail("mkdir "+m.Target, err)
		}
		if disk != nil {
			// Under a disk limit, a directory of the one sized tmpfs.
			if err := disk.bind(target, m.Options); err != nil {
				return fail("tmpfs "+m.Target, err)
			}
		} else if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, m.Options); err != nil {
			return fail("mount tmpfs "+m.Target, err)
		}
		if m.ReadOnly {
			return setAttr(target, unix.MOUNT_ATTR_RDONLY, false, "tmpfs "+m.Target)
		}
		return nil
	case backend.MountSymlink:
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fail("mkdir "+filepath.Dir(m.Target), err)
		}
		if err := os.Symlink(m.Source, target); err != nil {
			return fail("symlink "+m.Target, err)
		}
		return nil
	case backend.MountMask:
		return mask(target, m.Target, m.Optional)
	case backend.MountReadOnly, backend.MountPin:
		stage, attr := "protect "+m.Target, uint64(unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
		if m.Kind == backend.MountPin {
			stage, attr = "pin "+m.Target, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV
		}
		fi, err := os.Lstat(target)
		if errors.Is(err, os.ErrNotExist) {
			if m.Optional {
				return nil
			}
			return fail(stage, &backend.GoneError{Path: m.Target})
		}
		if err != nil {
			return fail(stage, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			// The Spec names resolved paths; a link here appeared since,
			// and following it would protect the wrong place.
			return fail(stage, errors.New("is a symbolic link (it changed while the sandbox was set up)"))
		}
		if err := unix.Mount(target, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fail(stage, err)
		}
		return setAttr(target, attr, m.Kind == backend.MountReadOnly, stage)
	case backend.MountProc:
		return mountProc(target, m.Target)
	case backend.MountDev:
		return buildDev(target)
	case backend.MountOverlay:
		return overlayMount(i, m, target, trees)
	case backend.MountFile:
		return fileMount(i, m, target)
	}
	return fail("mount "+m.Target, fmt.Errorf("unknown mount kind %q", m.Kind))
}

func bindMount(i int, m backend.Mount, target string, trees map[string]int) error {
	stage := "bind " + m.Source
	var st unix.Stat_t
	fd, fromTree := trees[fmt.Sprint(i)]
	var err error
	if fromTree {
		err = unix.Fstat(fd, &st)
	} else {
		err = unix.Stat(oldRoot+m.Source, &st)
	}
	if errors.Is(err, unix.ENOENT) {
		if m.Optional {
			return nil
		}
		return fail(stage, &backend.GoneError{Path: m.Target})
	}
	if err != nil {
		return fail(stage, err)
	}
	if err := mkTarget(target, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return fail(stage, err)
	}
	if fromTree {
		// A tree the host opened (and, for the workspace, id-mapped):
		// move it into place.
		err = unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
	} else {
		err = unix.Mount(oldRoot+m.Source, target, "", unix.MS_BIND|unix.MS_REC, "")
	}
	if err != nil {
		return fail(stage, err)
	}
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if m.ReadOnly {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	return setAttr(target, attr, true, stage)
}

// mountProc mounts the sandbox's procfs with hidepid=2 ("invisible"): a
// process sees in /proc only the processes it could ptrace. The command's
// own processes are all there; init, which is not dumpable before the
// command exists, is not: not its status, not its threads, and not the
// host's network that its threads other than the main one still see (see
// initMain). The numeric form is the one every kernel since 3.3 takes; a
// kernel that refused it would fail the run here, never mount a /proc
// that shows init.
func mountProc(target, name string) error {
	if err := os.MkdirAll(target, 0o555); err != nil {
		return fail("mkdir "+name, err)
	}
	if err := unix.Mount("proc", target, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=2"); err != nil {
		return fail("mount proc", err)
	}
	return nil
}

// mkTarget creates an empty directory or file to mount on.
func mkTarget(target string, dir bool) error {
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// setAttr adds mount attributes. Adding read-only, nosuid and nodev is
// always allowed in a user namespace; clearing a flag the host's mount
// had would be refused by the kernel, which is what we want.
func setAttr(target string, attr uint64, recursive bool, stage string) error {
	flags := uint(0)
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, target, flags, &unix.MountAttr{Attr_set: attr}); err != nil {
		return fail(stage+": set attributes", err)
	}
	return nil
}

// mask hides target: a directory becomes an empty read-only tmpfs, any
// other file the mode-0 mask file, which the command cannot open. A
// missing target is skipped if optional, and fails the run otherwise.
func mask(target, name string, optional bool) error {
	st, err := os.Lstat(target)
	if errors.Is(err, os.ErrNotExist) {
		if optional {
			return nil
		}
		return fail("mask "+name, &backend.GoneError{Path: name})
	}
	if err != nil {
		return fail("mask "+name, err)
	}
	if st.IsDir() {
		if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0000,size=4k"); err != nil {
			return fail("mask "+name, err)
		}
		return nil
	}
	// Read-only, nosuid, nodev and noexec like the mask file's own mount,
	// whose flags the bind copies.
	if err := unix.Mount(maskFile, target, "", unix.MS_BIND, ""); err != nil {
		return fail("mask "+name, err)
	}
	return nil
}

// maskAttrs are the mount attributes of the mask file, and so of every
// file masked with it.
const maskAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC

func maskProc(spec *backend.Spec) error {
	for _, p := range spec.MaskPaths {
		if err := mask(newRoot+p, p, true); err != nil {
			return err
		}
	}
	for _, p := range spec.ReadOnlyPaths {
		t := newRoot + p
		if _, err := os.Lstat(t); err != nil {
			continue
		}
		if err := unix.Mount(t, t, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fail("read-only "+p, err)
		}
		if err := setAttr(t, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, true, "read-only "+p); err != nil {
			return err
		}
	}
	return nil
}

// buildDev makes a minimal /dev. Device nodes cannot be created in a user
// namespace, so the few harmless ones are bound from the host's /dev.
func buildDev(target string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fail("mkdir /dev", err)
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fail("mount /dev", err)
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		t := target + "/" + d
		if err := mkTarget(t, false); err != nil {
			return fail("dev "+d, err)
		}
		if err := unix.Mount(oldRoot+"/dev/"+d, t, "", unix.MS_BIND, ""); err != nil {
			return fail("dev "+d, err)
		}
	}
	if err := os.Mkdir(target+"/pts", 0o755); err != nil {
		return fail("dev pts", err)
	}
	if err := unix.Mount("devpts", target+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fail("mount devpts", err)
	}
	if err := os.Mkdir(target+"/shm", 0o755); err != nil {
		return fail("dev shm", err)
	}
	if disk != nil {
		if err := disk.bind(target+"/shm", "mode=1777"); err != nil {
			return fail("dev shm", err)
		}
	} else if err := unix.Mount("tmpfs", target+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fail("mount /dev/shm", err)
	}
	links := [][2]string{
		{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
	}
	for _, l := range links {
		if err := os.Symlink(l[0], target+"/"+l[1]); err != nil {
			return fail("dev "+l[1], err)
		}
	}
	return setAttr(target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false, "dev")
}

// overlayMount mounts the copy-on-write workspace. The layers are staged on
// the temporary root first (trees the host opened, or paths under the
// host's root); overlayfs keeps its own references to them, so they vanish
// from view with the temporary root while the overlay stays. In a user
// namespace overlayfs needs "userxattr": whiteouts and opaque directories
// are then recorded in user.overlay.* attributes of the upper layer.
func overlayMount(i int, m backend.Mount, target string, trees map[string]int) error {
	stage := "overlay " + m.Target
	lower, layers := oldRoot+m.Source, oldRoot+m.Layers
	key := fmt.Sprint(i)
	if fd, ok := trees[key]; ok {
		lower = fmt.Sprintf("/stage/%d/lower", i)
		if err := moveTree(fd, lower); err != nil {
			return fail(stage+": lower layer", err)
		}
	}
	if fd, ok := trees[key+"/layers"]; ok {
		layers = fmt.Sprintf("/stage/%d/layers", i)
		if err := moveTree(fd, layers); err != nil {
			return fail(stage+": upper layer", err)
		}
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fail(stage, err)
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s/upper,workdir=%s/work,userxattr", lower, layers, layers)
	if disk != nil {
		// The run writes to the disk-limit tmpfs; the change set's layer
		// so far is read-only under it, and merged into after the run.
		upper, work, err := disk.overlayLayers(layers + "/upper")
		if err != nil {
			return fail(stage+": disk limit", err)
		}
		opts = fmt.Sprintf("lowerdir=%s/upper:%s,upperdir=%s,workdir=%s,userxattr", layers, lower, upper, work)
	}
	if err := unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fail(stage, fmt.Errorf("mount overlay (%s): %w", opts, err))
	}
	return nil
}

func moveTree(fd int, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return unix.MoveMount(fd, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// fileMount writes the file on the temporary root (gone with it after the
// final pivot; the bind keeps the file) and binds it read-only at target.
func fileMount(i int, m backend.Mount, target string) error {
	stage := "file " + m.Target
	src := fmt.Sprintf("/file%d", i)
	if err := os.WriteFile(src, []byte(m.Data), 0o644); err != nil {
		return fail(stage, err)
	}
	if err := mkTarget(target, false); err != nil {
		return fail(stage, err)
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fail(stage, err)
	}
	return setAttr(target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, false, stage)
}

// baseTmpfsOptions sizes the tmpfs the root is assembled on: room for the
// mask file, the mount points, and the content of the Spec's file mounts
// (a CA bundle for secrets is a few hundred KiB).
func baseTmpfsOptions(spec *backend.Spec) string {
	n := 64 << 10
	for _, m := range spec.Mounts {
		if m.Kind == backend.MountFile {
			n += (len(m.Data) + 4095) &^ 4095
		}
	}
	return fmt.Sprintf("mode=0755,size=%d", n)
}
