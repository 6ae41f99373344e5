package gvisor

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
)

// overlayPrefix names the mount points of a container's overlay
// workspaces in its directory.
const overlayPrefix = "overlay-"

// mountOverlays mounts each MountOverlay of spec on the host, in dir,
// as the native backend mounts it in its sandbox (the same layers and
// options: the workspace package reads the upper layer the same way),
// and returns spec with each replaced by a writable bind of the merged
// view, which runsc's gofer serves like any other. Mounted by root, on
// the host: the sandbox's user writes through the gofer, as its own uid.
// unmountOverlays undoes it, and must run before dir is removed.
func mountOverlays(spec *backend.Spec, dir string) (*backend.Spec, error) {
	var out *backend.Spec
	for i, m := range spec.Mounts {
		if m.Kind != backend.MountOverlay {
			continue
		}
		if out == nil {
			cp := *spec
			cp.Mounts = append([]backend.Mount(nil), spec.Mounts...)
			out = &cp
		}
		mp := filepath.Join(dir, fmt.Sprintf("%s%d", overlayPrefix, i))
		if err := os.Mkdir(mp, 0o755); err != nil {
			return nil, &backend.InitError{Stage: "overlay " + m.Target, Err: err}
		}
		// The merged view's root is the upper layer's: the command,
		// which writes as its own uid through the gofer, must own it
		// (and overlayfs's scratch directory), as the native backend
		// gives them to the command's host uid.
		for _, d := range []string{"upper", "work"} {
			if err := os.Lchown(filepath.Join(m.Layers, d), spec.User.UID, spec.User.GID); err != nil {
				return nil, &backend.InitError{Stage: "overlay " + m.Target, Err: err}
			}
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s/upper,workdir=%s/work,userxattr", m.Source, m.Layers, m.Layers)
		if err := unix.Mount("overlay", mp, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return nil, &backend.InitError{Stage: "overlay " + m.Target, Err: fmt.Errorf("mount overlay (%s): %w", opts, err)}
		}
		out.Mounts[i] = backend.Mount{Kind: backend.MountBind, Source: mp, Target: m.Target}
	}
	if out == nil {
		return spec, nil
	}
	return out, nil
}

// unmountOverlays detaches the overlay mounts in dir (mountOverlays), so
// that removing dir cannot reach into a change set's upper layer.
func unmountOverlays(dir string) {
	mps, _ := filepath.Glob(filepath.Join(dir, overlayPrefix+"*"))
	for _, mp := range mps {
		for unix.Unmount(mp, unix.MNT_DETACH) == nil {
		}
	}
}
