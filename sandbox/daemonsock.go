package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// DaemonSocketsRecord is the file in the state directory stateDir where a
// daemon (package daemon) records the unix sockets it serves on, one
// absolute path a line, for the runs of its user to find.
func DaemonSocketsRecord(stateDir string) string { return filepath.Join(stateDir, "daemon", "sockets") }

// RecordDaemonSockets writes socks to DaemonSocketsRecord(stateDir), or
// removes the record when socks is empty.
func RecordDaemonSockets(stateDir string, socks []string) error {
	path := DaemonSocketsRecord(stateDir)
	var b strings.Builder
	for _, s := range socks {
		if filepath.IsAbs(s) && !strings.ContainsRune(s, '\n') {
			b.WriteString(s + "\n")
		}
	}
	if b.Len() == 0 {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// daemonSockets are where a moat daemon the caller could drive listens:
// the sockets a daemon of the caller's state directory recorded
// (DaemonSocketsRecord: moat serve's, and moat mcp's approvals sockets),
// and where one listens when not told otherwise
// (client.DefaultSocket, for the caller and for root): $MOAT_SOCKET,
// /run/moat/moat.sock, $XDG_RUNTIME_DIR/moat.sock (and
// /run/user/UID/moat.sock), and moat-UID/moat.sock in the temporary
// directory.
//
// A record that is there but cannot be read is an error: the run would
// not know the sockets it must keep out of its sight.
func daemonSockets(c Caller) ([]string, error) {
	env := map[string]string{}
	for _, kv := range c.Environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	uid := strconv.Itoa(c.UID)
	tmp := env["TMPDIR"]
	if !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	socks := []string{"/run/moat/moat.sock", "/run/user/" + uid + "/moat.sock", filepath.Join(tmp, "moat-"+uid, "moat.sock")}
	for _, k := range []string{"MOAT_SOCKET", "XDG_RUNTIME_DIR"} {
		v := env[k]
		if k == "XDG_RUNTIME_DIR" && v != "" {
			v = filepath.Join(v, "moat.sock")
		}
		if filepath.IsAbs(v) {
			socks = append(socks, v)
		}
	}
	if dir, err := workspace.StateDir(); err == nil {
		// moat serve's, and those of moat mcp's servers (each a daemon
		// of its own, in mcp/session-*: an --approvals-socket).
		records := []string{DaemonSocketsRecord(dir)}
		if more, err := filepath.Glob(DaemonSocketsRecord(filepath.Join(dir, "mcp", "session-*"))); err == nil {
			records = append(records, more...)
		}
		for _, r := range records {
			b, err := os.ReadFile(r)
			if errors.Is(err, fs.ErrNotExist) {
				continue // no daemon recorded one
			}
			if err != nil {
				return nil, fmt.Errorf("the moat daemons' sockets, which the command must not see: %w", err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				if filepath.IsAbs(line) {
					socks = append(socks, line)
				}
			}
		}
	}
	return socks, nil
}

// liveDaemonSockets are the daemonSockets that are sockets now, each as
// written and with its links resolved. Compile finds them with the
// caller's own rights, before it takes a tenant's (asOwner): the records
// are in the caller's state directory, which the tenant cannot read, and
// the paths are the caller's, not the tenant's, so looking at them tells
// the tenant nothing.
func liveDaemonSockets(c Caller) ([][]string, error) {
	socks, err := daemonSockets(c)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, sock := range socks {
		fi, err := os.Stat(sock)
		if err != nil || fi.Mode().Type() != fs.ModeSocket {
			continue
		}
		out = append(out, []string{sock, filepath.Clean(sock), realPath(sock)})
	}
	return out, nil
}

// checkDaemonSockets refuses a policy whose command would see the unix
// socket of a moat daemon (socks, from liveDaemonSockets): in the
// workspace or under a read-only or writable path, and not hidden by a
// denied one. Connecting to a unix socket needs no write access to its
// directory, so a read-only view is enough, and the daemon would know
// the command by its host uid, the caller's: it could answer the
// caller's pending approvals and, as the daemon's own user, make a
// session of any policy and run in it, out of this sandbox.
func checkDaemonSockets(p *policy.Policy, socks [][]string) error {
	shown := append([]string{p.Workspace.Path}, p.Filesystem.ReadOnly...)
	shown = append(shown, p.Filesystem.ReadWrite...)
	for _, s := range socks {
		sock := s[0]
		for _, path := range s[1:] {
			if underPaths(path, p.Filesystem.Deny) {
				continue
			}
			for _, v := range shown {
				if underPaths(path, []string{v}) {
					return fmt.Errorf("the moat daemon's socket %s is under %s, which the command would see: it could drive the daemon through it as you (answer your pending approvals, make a session of another policy); list narrower paths, or add %q to filesystem.deny", sock, v, sock)
				}
			}
		}
	}
	return nil
}

// underPaths says whether path is at or below one of dirs, as written or
// with their links resolved.
func underPaths(path string, dirs []string) bool {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if within(filepath.Clean(d), path) || within(realPath(d), path) {
			return true
		}
	}
	return false
}
