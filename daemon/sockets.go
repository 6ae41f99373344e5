package daemon

import (
	"fmt"
	"path/filepath"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// checkSockets refuses p, a session's policy over the workspace ws, when
// its commands would see one of the daemon's sockets (Config.Sockets):
// in the workspace, or under a path the policy shows them read-only or
// writable, and not under one it hides. Connecting to a unix socket
// needs no write access to its directory, so a read-only view is enough
// to drive the daemon.
func (m *Manager) checkSockets(p *policy.Policy, ws string) error {
	// A writable path the sandbox refuses anyway (/, the host's system,
	// moat's state) is said first, as moat run says it: that it also
	// shows the socket is the lesser news.
	if err := sandbox.CheckWritablePaths(p, ""); err != nil {
		return err
	}
	shown := append([]string{ws}, p.Filesystem.ReadOnly...)
	shown = append(shown, p.Filesystem.ReadWrite...)
	for _, sock := range m.cfg.Sockets {
		if sock == "" {
			continue
		}
		paths := []string{sock}
		if dir, err := filepath.EvalSymlinks(filepath.Dir(sock)); err == nil {
			paths = append(paths, filepath.Join(dir, filepath.Base(sock)))
		}
		for _, path := range paths {
			if inAny(path, p.Filesystem.Deny) {
				continue
			}
			for _, v := range shown {
				if inAny(path, []string{v}) {
					return fmt.Errorf("%w: the daemon's socket %s is under %s, which the session's commands see: they could drive the daemon through it (make sessions, answer their own approvals); put the socket elsewhere", ErrWorkspace, sock, v)
				}
			}
		}
	}
	return nil
}

// inAny says whether path is at or below one of dirs (absolute), as
// written or with their links resolved.
func inAny(path string, dirs []string) bool {
	var ds []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		ds = append(ds, filepath.Clean(d))
		if r, err := filepath.EvalSymlinks(d); err == nil {
			ds = append(ds, r)
		}
	}
	return underAny(path, ds)
}
