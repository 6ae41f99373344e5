package harness

import (
	"path"
	"strings"

	"github.com/moatbox/moat/policy"
)

// scratch is where the built-in delete-outside rule need not ask: the
// workspace's content, which the command may already delete by relative
// path (rm -rf build), spelt absolutely, as agents spell paths
// (rm -rf /path/to/workspace/build). kept are the workspace itself and
// the host paths bound writable (read_write): deleting the workspace
// whole, a read_write path or what is in it, or anything above either,
// is still asked about. A policy's own rules are never narrowed.
//
// The sandbox's own /tmp, /dev/shm and home go with the sandbox, but a
// git directory outside the workspace is bound writable at its host path,
// which may be under them: they are in it only for rules that know the
// sandbox's mounts (Rules.InSandbox), as a run's exec check, a session and
// a run's line (the binds found ahead, as its guards will find them) do.
type scratch struct {
	ws   string   // the workspace, cleaned and absolute; "" when not known
	kept []string // the read_write paths and other writable binds: nothing in or above them
	own  []string // the sandbox's own trees (its /tmp, home): what is not kept in them
}

// newScratch reads p's workspace and read_write paths. A path that is
// not absolute (a policy not resolved yet) leaves the scratch empty,
// which only makes the rule ask more.
func newScratch(p *policy.Policy) scratch {
	ws := p.Workspace.Path
	if !path.IsAbs(ws) || path.Clean(ws) == "/" {
		return scratch{}
	}
	s := scratch{ws: path.Clean(ws)}
	for _, rw := range p.Filesystem.ReadWrite {
		if !path.IsAbs(rw) {
			// "~/x" not expanded yet: where it lands is not known.
			return scratch{}
		}
		s.kept = append(s.kept, path.Clean(rw))
	}
	return s
}

// reaches reports whether a deletion from the directory dir by relative
// path can reach what outlives the sandbox: dir is the workspace, in or
// above it, or in or above a read_write path. Elsewhere (the sandbox's own
// /tmp) it cannot; unknown (no workspace known), it may.
func (s *scratch) reaches(dir string) bool {
	if s.ws == "" {
		return true
	}
	dir = path.Clean(dir)
	if under(dir, s.ws) || under(s.ws, dir) {
		return true
	}
	for _, k := range s.kept {
		if under(dir, k) || under(k, dir) {
			return true
		}
	}
	return false
}

// confines reports whether every operand of the rm command argv that
// could reach outside the workspace stays within s (see scratch); false
// when any might not, or when argv cannot be read that far.
func (s *scratch) confines(argv []string) bool {
	if s.ws == "" {
		return false
	}
	opts := true
	for _, w := range argv[1:] {
		if opts && w == "--" {
			opts = false
			continue
		}
		if opts && len(w) > 1 && w[0] == '-' {
			continue
		}
		if !s.holds(w) {
			return false
		}
	}
	return true
}

// holds reports whether the operand w names only paths in s.
func (s *scratch) holds(w string) bool {
	// Quotes are the shell's (a line's words keep them); what they
	// enclose is the same path. An escape, a variable or ~ (HOME too: the
	// line or the request may set it to anything; a program started gets
	// it expanded, which the exec check then decides), a brace expansion
	// or an extended glob (bash's extglob, zsh's qualifiers: a pattern in
	// parentheses) is not read here.
	w = strings.NewReplacer(`"`, "", `'`, "").Replace(w)
	if strings.ContainsAny(w, "\\`${}()") || strings.HasPrefix(w, "~") {
		return false
	}
	if !path.IsAbs(w) {
		// Relative: only a path through .. reaches the rule, and a link
		// on the way may lead anywhere.
		return !hasDotDot(w)
	}
	if hasDotDot(w) {
		return false
	}
	p := path.Clean(w)
	// A glob names paths in the directory its first pattern is in: that
	// directory must be in the workspace, and no path the glob may name
	// may hold or be a kept one.
	pat := ""
	if i := strings.IndexAny(p, "*?["); i >= 0 {
		pat, p = p, path.Dir(p[:i+1])
	}
	if under(p, s.ws) {
		if p == s.ws && pat == "" {
			// The workspace itself, .git and all (rm refuses . and ..: a
			// deletion of the whole project is asked about).
			return false
		}
	} else if !s.owned(p) || under(s.ws, p) && (pat == "" || globReaches(pat, s.ws)) {
		// Outside, or above the workspace in the sandbox's own /tmp.
		return false
	}
	for _, k := range s.kept {
		if under(p, k) {
			return false // in a read_write path
		}
		if under(k, p) && (pat == "" || globReaches(pat, k)) {
			return false // above one
		}
	}
	return true
}

// owned reports whether p is in one of the sandbox's own trees.
func (s *scratch) owned(p string) bool {
	for _, d := range s.own {
		if under(p, d) {
			return true
		}
	}
	return false
}

// globReaches reports whether the glob pat may name k, a path above k or
// one below it: its components match k's as far as both go. Both are
// compared in lower case, as a shell with nocaseglob matches them, and
// path.Match lets * match a leading dot, which a shell need not: either
// only asks more.
func globReaches(pat, k string) bool {
	pc, kc := strings.Split(strings.ToLower(pat), "/"), strings.Split(strings.ToLower(k), "/")
	n := min(len(pc), len(kc))
	ok, err := path.Match(strings.Join(pc[:n], "/"), strings.Join(kc[:n], "/"))
	return ok || err != nil
}

// under reports whether p is dir or below it; both are clean and
// absolute.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}

func hasDotDot(w string) bool {
	for _, c := range strings.Split(w, "/") {
		if c == ".." {
			return true
		}
	}
	return false
}
