package policy

import (
	"fmt"
	"path"
	"strings"
)

// MatchWrite reports whether rel, a clean path relative to the workspace
// (no leading "/", no ".."), matches m's Write glob. The glob is matched
// element by element: "**" matches any number of elements, none
// included; any other element is a path.Match glob matched against one
// element. So "src/**" matches src and everything under it, "*.env" only
// a file at the top, "**/*.env" one at any depth. An invalid glob
// matches nothing (Validate reports it).
func (m *Match) MatchWrite(rel string) bool {
	if m.Write == "" {
		return false
	}
	return matchElems(strings.Split(path.Clean(m.Write), "/"), strings.Split(path.Clean(rel), "/"))
}

// MatchPath reports whether p, a request's path, matches m's Path glob,
// element by element as MatchWrite matches: "**" matches any number of
// elements ("/admin/**" is /admin and everything under it), any other
// element is a path.Match glob of one element ("/admin/*" is one level).
func (m *Match) MatchPath(p string) bool {
	if m.Path == "" {
		return false
	}
	return matchElems(strings.Split(m.Path, "/"), strings.Split(p, "/"))
}

// matchElems matches name against pat element by element, "**" matching
// any number of elements. It keeps, for each element of pat in turn, the
// set of name's prefixes matched so far: a pattern and a path a tenant
// both chooses cost len(pat)×len(name) element matches, where trying each
// "**" at each place in turn cost their power (eight "**" against forty
// elements held a daemon's CPU for seconds a request).
func matchElems(pat, name []string) bool {
	cur := make([]bool, len(name)+1) // cur[j]: pat so far matches name[:j]
	next := make([]bool, len(name)+1)
	cur[0] = true
	for _, p := range pat {
		clear(next)
		alive := false
		if p == "**" {
			seen := false
			for j := range cur {
				seen = seen || cur[j]
				next[j] = seen
				alive = alive || seen
			}
		} else {
			for j := 0; j < len(name); j++ {
				if cur[j] {
					if ok, err := path.Match(p, name[j]); err == nil && ok {
						next[j+1], alive = true, true
					}
				}
			}
		}
		if !alive {
			return false
		}
		cur, next = next, cur
	}
	return cur[len(name)]
}

// validWrite checks a Write glob: relative, inside the workspace, and
// every element a valid glob.
func validWrite(glob string) error {
	clean := path.Clean(glob)
	if path.IsAbs(glob) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("%q: write globs are relative to the workspace and stay inside it", glob)
	}
	for _, e := range strings.Split(clean, "/") {
		if _, err := path.Match(e, ""); err != nil {
			return fmt.Errorf("%q: %q is not a valid glob", glob, e)
		}
	}
	return nil
}

// checkWriteExamples reports every example a write rule gets wrong: each
// is one path relative to the workspace.
func checkWriteExamples(l *errorList, key string, r *Rule) {
	for _, ex := range []struct {
		field string
		list  [][]string
		want  bool
	}{{"examples_match", r.ExamplesMatch, true}, {"examples_not_match", r.ExamplesNotMatch, false}} {
		for i, p := range ex.list {
			f := indexKey(key+"."+ex.field, i)
			switch {
			case len(p) != 1 || p[0] == "":
				l.add(f, `an example of a write rule is one path relative to the workspace (e.g. "src/main.go")`)
			case path.IsAbs(p[0]) || path.Clean(p[0]) == ".." || strings.HasPrefix(path.Clean(p[0]), "../"):
				l.add(f, fmt.Sprintf("%q: an example path is relative to the workspace and stays inside it", p[0]))
			case r.Match.MatchWrite(p[0]) != ex.want:
				verb := "does not match"
				if !ex.want {
					verb = "matches"
				}
				l.add(f, fmt.Sprintf("the rule %s its own example %q", verb, p[0]))
			}
		}
	}
}
