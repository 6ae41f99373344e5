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

func matchElems(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// Runs of "**" mean one.
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			for i := 0; i <= len(name); i++ {
				if matchElems(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
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
