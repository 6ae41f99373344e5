package daemon

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The policy's filesystem lists reach into the workspace as well: a path
// of it that filesystem.deny names is masked from the session's commands,
// one that filesystem.read_only names is mounted read-only over it (a
// deeper filesystem.read_write one writable again). The files API keeps
// them as a command meets them, for every caller, MCP's read_file and
// write_file among them: a hidden path is neither read, listed, written nor
// downloaded, a read-only one not changed; nor described (Stat) or named
// (List, Resolve), and a path below a hidden directory is refused whether
// it exists or not, so that what it holds cannot be probed.

// fsRule is the deepest entry of the policy's filesystem lists at or
// above rel (real, relative to the root): "deny", "ro", "rw" or "" for
// none. A denied path is masked above every other mount.
func (s *Session) fsRule(rel string) string {
	if s.policy == nil {
		return ""
	}
	fl := s.fsLists()
	if underAny(rel, fl.deny) {
		return "deny"
	}
	rule, depth := "", -1
	// Read-write entries after read-only ones: at the same path the
	// sandbox mounts them later.
	for _, l := range []struct {
		name string
		list []string
	}{{"ro", fl.ro}, {"rw", fl.rw}} {
		for _, r := range l.list {
			if n := strings.Count(r, "/") + 1; r != "." && underAny(rel, []string{r}) && n >= depth {
				rule, depth = l.name, n
			}
		}
	}
	return rule
}

// fsLists are the policy's filesystem lists within the workspace
// (inWorkspace), resolved once per session rather than at every path the
// files API or a tar entry checks: the policy does not change, and the
// sandbox's mounts were made from these paths once.
type fsLists struct{ deny, ro, rw []string }

func (s *Session) fsLists() *fsLists {
	s.fsOnce.Do(func() {
		fs := s.policy.Filesystem
		s.fsl = fsLists{deny: s.inWorkspace(fs.Deny), ro: s.inWorkspace(fs.ReadOnly), rw: s.inWorkspace(fs.ReadWrite)}
	})
	return &s.fsl
}

// inWorkspace returns the host paths of list that lie in the workspace,
// relative to it ("." for the workspace itself), each also where its
// links lead (the sandbox masks a denied link's target too).
func (s *Session) inWorkspace(list []string) []string {
	var out []string
	for _, e := range list {
		paths := []string{e}
		if r, err := filepath.EvalSymlinks(e); err == nil && r != e {
			paths = append(paths, r)
		}
		for _, p := range paths {
			if r, err := filepath.Rel(s.Workspace, p); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
				out = append(out, r)
			}
		}
	}
	return out
}

// underAny says whether rel is at or below one of rels, all relative
// ("." is the top) or all absolute.
func underAny(rel string, rels []string) bool {
	for _, r := range rels {
		if r == "." || r == "/" || rel == r || strings.HasPrefix(rel, r+"/") {
			return true
		}
	}
	return false
}

// readable refuses rel (real, relative to the root; asked for as asked)
// when the policy hides it from the session's commands.
func (s *Session) readable(asked, rel string) error {
	if s.fsRule(rel) == "deny" {
		return &hiddenError{asked}
	}
	return nil
}

// hiddenError refuses a path the policy hides from the session's
// commands: an ErrWorkspace.
type hiddenError struct{ asked string }

func (e *hiddenError) Error() string {
	return fmt.Sprintf("%v: %q is hidden from the session by the policy (filesystem.deny)", ErrWorkspace, e.asked)
}

func (e *hiddenError) Unwrap() error { return ErrWorkspace }

// changeable refuses rel (real, relative to the root; asked for as asked)
// when the policy hides it from the session's commands or makes it
// read-only for them.
func (s *Session) changeable(asked, rel string) error {
	switch s.fsRule(rel) {
	case "deny":
		return &hiddenError{asked}
	case "ro":
		return fmt.Errorf("%w: %q is read-only in the session (filesystem.read_only)", ErrWorkspace, asked)
	}
	return nil
}
