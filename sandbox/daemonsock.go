package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/internal/daemonrec"
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
	data := socketLines(socks)
	if data == "" {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(data), 0o600)
}

// PublicDaemonSocketsRecord is the file where a root daemon of the state
// directory stateDir records the unix sockets it serves on for every
// user's runs to find (RecordPublicDaemonSockets): a root daemon whose
// socket lets other users in knows them by their uid, and their runs
// cannot read its state directory. One file per state directory, which
// one daemon at a time serves: daemons do not overwrite each other's,
// and a daemon that restarts replaces what it left.
func PublicDaemonSocketsRecord(stateDir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(stateDir)))
	return filepath.Join(daemonrec.Dir, hex.EncodeToString(sum[:16]))
}

// RecordPublicDaemonSockets writes socks to
// PublicDaemonSocketsRecord(stateDir), readable by all, or removes the
// record when socks is empty. Only root can: the directory of the
// records (/run/moat-daemons) is root's, mode 0755, in directories that
// only root can change, so that no other user can add a record (and
// have runs refused) or remove one (and have a socket shown); it is
// made so, and a directory others could change is an error.
func RecordPublicDaemonSockets(stateDir string, socks []string) error {
	path := PublicDaemonSocketsRecord(stateDir)
	data := socketLines(socks)
	if data == "" {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	if fi, err := os.Lstat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	} else if fi.Mode().Perm() != 0o755 {
		// The umask does not decide: a directory others cannot read
		// would refuse their every run.
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
	}
	if err := rootOnly(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, publicTempPrefix)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// publicTempPrefix names a public record while it is written.
const publicTempPrefix = ".tmp-"

// socketLines is socks, the absolute paths among them, one a line.
func socketLines(socks []string) string {
	var b strings.Builder
	for _, s := range socks {
		if filepath.IsAbs(s) && !strings.ContainsRune(s, '\n') {
			b.WriteString(s + "\n")
		}
	}
	return b.String()
}

// rootOnly says why dir, or a directory above it, could be changed by a
// user other than root: one that is not root's, or that its group or
// others may write (but for a sticky directory above it, such as /tmp,
// where they cannot rename or remove root's entries). Links are followed
// first.
func rootOnly(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner known", d)
		}
		sticky := d != real && fi.Mode()&fs.ModeSticky != 0
		if st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 && !sticky {
			return fmt.Errorf("%s can be changed by others than root (owner uid %d, mode %v)", d, st.Uid, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// daemonSockets are where a moat daemon the caller could drive listens:
// where one listens when not told otherwise (client.DefaultSockets, for
// the caller's uid and environment: its own daemon's places, and root's);
// the sockets a daemon of the caller's state directory recorded
// (DaemonSocketsRecord: moat serve's, and moat mcp's approvals sockets);
// and those every root daemon recorded for all users
// (PublicDaemonSocketsRecord), such as a root moat serve's --socket that
// --socket-mode opens to them.
//
// A record that is there but cannot be read is an error, and so is a
// directory of public records that others than root could change: the
// run would not know the sockets it must keep out of its sight. No
// directory of public records is no root daemon.
func daemonSockets(c Caller) ([]string, error) {
	env := map[string]string{}
	for _, kv := range c.Environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	var socks []string
	for _, s := range client.DefaultSockets(c.UID, func(k string) string { return env[k] }) {
		if filepath.IsAbs(s) {
			socks = append(socks, s)
		}
	}
	var records []string
	if dir, err := workspace.StateDir(); err == nil {
		// moat serve's, and those of moat mcp's servers (each a daemon
		// of its own, in mcp/session-*: an --approvals-socket).
		records = append(records, DaemonSocketsRecord(dir))
		if more, err := filepath.Glob(DaemonSocketsRecord(filepath.Join(dir, "mcp", "session-*"))); err == nil {
			records = append(records, more...)
		}
	}
	public, err := publicRecords()
	if err != nil {
		return nil, fmt.Errorf("the moat daemons' sockets, which the command must not see: %w", err)
	}
	for _, r := range append(records, public...) {
		b, err := os.ReadFile(r)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no daemon recorded one, or it has just stopped
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
	return socks, nil
}

// publicRecords are the files of daemonrec.Dir: none when it is missing,
// an error when it cannot be listed or others than root could change it.
func publicRecords() ([]string, error) {
	ents, err := os.ReadDir(daemonrec.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := rootOnly(daemonrec.Dir); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		// A record being written (RecordPublicDaemonSockets) is not one
		// yet: it is renamed into place whole. One a killed daemon left
		// stays mode 0600, and reading it would refuse every other
		// user's run.
		if strings.HasPrefix(e.Name(), publicTempPrefix) {
			continue
		}
		out = append(out, filepath.Join(daemonrec.Dir, e.Name()))
	}
	return out, nil
}

// liveSocket is one of daemonSockets that is a socket now.
type liveSocket struct {
	path  string // as found
	clean string // filepath.Clean(path)
	real  string // with its links resolved
}

// liveDaemonSockets are the daemonSockets that are sockets now. Compile
// finds them with the caller's own rights, before it takes a tenant's
// (asOwner): the records are in the caller's state directory, which the
// tenant cannot read, and the paths are the caller's, not the tenant's,
// so looking at them tells the tenant nothing.
func liveDaemonSockets(c Caller) ([]liveSocket, error) {
	socks, err := daemonSockets(c)
	if err != nil {
		return nil, err
	}
	var out []liveSocket
	for _, sock := range socks {
		fi, err := os.Stat(sock)
		if err != nil || fi.Mode().Type() != fs.ModeSocket {
			continue
		}
		out = append(out, liveSocket{path: sock, clean: filepath.Clean(sock), real: realPath(sock)})
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
func checkDaemonSockets(p *policy.Policy, socks []liveSocket) error {
	for _, s := range socks {
		if v := shownAt(p, s.clean, s.real); v != "" {
			return fmt.Errorf("the moat daemon's socket %s is under %s, which the command would see: it could drive the daemon through it as you (answer your pending approvals, make a session of another policy); list narrower paths, or add %q to filesystem.deny", s.path, v, s.path)
		}
	}
	return nil
}

// checkSecretFileHidden refuses a secret whose file the command would
// see (in the workspace, under a read-only or writable path, and not
// hidden by a denied one): it could read the value the placeholder
// stands for, and send it anywhere the allowlist lets it. A policy's
// relative "file:" lands beside the policy, in the workspace when that
// is .moat.toml. Both the path as written and where its links lead must
// be out of view.
//
// A file with more than one hard link is refused too: its other names
// may lie anywhere on its filesystem, in view, and finding them would
// take a walk of every tree the command sees.
func checkSecretFileHidden(p *policy.Policy, file string) error {
	if v := shownAt(p, filepath.Clean(file), realPath(file)); v != "" {
		return fmt.Errorf("%w: the secret's file %s is under %s, which the command would see and could read the value from; keep the file outside what the sandbox shows, or add %q to filesystem.deny", ErrRefused, file, v, file)
	}
	if n := linkCount(file); n > 1 {
		return fmt.Errorf("%w: the secret's file %s has %d hard links: another name of it could be where the command sees it; keep the value in a file of one link (cp it, then remove the others)", ErrRefused, file, n)
	}
	return nil
}

// shownAt returns the visible tree (the workspace, a read-only or a
// writable path) that one of paths is under and no denied path hides,
// or "" when the command sees none of them.
func shownAt(p *policy.Policy, paths ...string) string {
	shown := append([]string{p.Workspace.Path}, p.Filesystem.ReadOnly...)
	shown = append(shown, p.Filesystem.ReadWrite...)
	for _, path := range paths {
		if underPaths(path, p.Filesystem.Deny) {
			continue
		}
		for _, v := range shown {
			if underPaths(path, []string{v}) {
				return v
			}
		}
	}
	return ""
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

// linkCount is the number of hard links of the file path leads to, or 0
// when it cannot be read (its reading fails later, with its own error).
func linkCount(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}
