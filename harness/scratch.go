package harness

import (
	"path"
	"strings"

	"github.com/moatbox/moat/policy"
)

// scratch is where a deletion stays within what the sandbox itself owns:
// the workspace's content (the command may already delete there by
// relative path) and the private tmpfs mounts every sandbox gets (/tmp,
// /dev/shm and its home), which go with it. kept are the workspace and
// the host paths bound writable (read_write): deleting the workspace
// whole, a read_write path or what is in it, or anything above either,
// can reach what outlives the sandbox.
//
// It refines the built-in delete-outside rule only: `rm -rf /tmp/build`
// or an absolute path into the workspace, the spelling agents use, is
// then not asked about. A policy's own rules are never refined.
type scratch struct {
	roots []string // cleaned absolute paths a deletion may stay under
	kept  []string // the workspace and read_write paths: nothing above them, nor the workspace whole, nor what is in a read_write one
	rw    int      // kept[rw:] are the read_write paths
}

// newScratch reads p's workspace, read_write paths and home. A path that
// is not absolute (a policy not resolved yet) is left out, which only
// makes the rule ask more.
func newScratch(p *policy.Policy) scratch {
	var s scratch
	home := defaultHome
	if v, ok := p.Env.Set["HOME"]; ok {
		home = v
	} else {
		for _, pat := range p.Env.Pass {
			if ok, _ := path.Match(pat, "HOME"); ok {
				home = "" // the caller's own, not known where the decision is made
			}
		}
	}
	s.roots = []string{"/tmp", "/dev/shm"}
	if path.IsAbs(home) && path.Clean(home) != "/" {
		s.roots = append(s.roots, path.Clean(home))
	}
	if ws := p.Workspace.Path; path.IsAbs(ws) && path.Clean(ws) != "/" {
		s.roots = append(s.roots, path.Clean(ws))
		s.kept = append(s.kept, path.Clean(ws))
	}
	s.rw = len(s.kept)
	for _, rw := range p.Filesystem.ReadWrite {
		if !path.IsAbs(rw) {
			// "~/x" not expanded yet: where it lands is not known, so
			// no root holds it for sure.
			return scratch{}
		}
		s.kept = append(s.kept, path.Clean(rw))
	}
	return s
}

// defaultHome is the home a sandbox gets when the policy sets none (see
// policy.Env.Set).
const defaultHome = "/home/agent"

// confines reports whether every operand of the rm command argv that
// could reach outside the workspace stays within s (see scratch); false
// when any might not, or when argv cannot be read that far.
func (s *scratch) confines(argv []string) bool {
	if len(s.roots) == 0 {
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
	// it expanded, which the exec check then decides) or a brace
	// expansion is not read here.
	w = strings.NewReplacer(`"`, "", `'`, "").Replace(w)
	if strings.ContainsAny(w, "\\`${}") || strings.HasPrefix(w, "~") {
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
	// directory must be in a root, and no path the glob may name may hold
	// or be a kept one.
	pat := ""
	if i := strings.IndexAny(p, "*?["); i >= 0 {
		pat, p = p, path.Dir(p[:i+1])
	}
	if !s.inRoot(p) {
		return false
	}
	for i, k := range s.kept {
		if i >= s.rw && under(p, k) {
			return false // in a read_write path
		}
		if k != p && under(k, p) && (pat == "" || globReaches(pat, k)) {
			return false // above the workspace or a read_write path
		}
		if i < s.rw && k == p && pat == "" {
			// The workspace itself, .git and all: rm refuses . and ..,
			// and a deletion of the whole project is asked about.
			return false
		}
	}
	return true
}

// globReaches reports whether the glob pat may name k, a path above k or
// one below it: its components match k's as far as both go. path.Match
// lets * match a leading dot, which the shell does not: that only asks
// more.
func globReaches(pat, k string) bool {
	pc, kc := strings.Split(pat, "/"), strings.Split(k, "/")
	n := min(len(pc), len(kc))
	ok, err := path.Match(strings.Join(pc[:n], "/"), strings.Join(kc[:n], "/"))
	return ok || err != nil
}

func (s *scratch) inRoot(p string) bool {
	for _, r := range s.roots {
		if under(p, r) {
			return true
		}
	}
	return false
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
