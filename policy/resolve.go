package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Resolve makes every path in p absolute and clean, so that the policy no
// longer depends on where it was read from:
//
//   - workspace.path relative to the directory of Source when the file sets
//     it, else (the built-in policy, a path set by a flag (see MarkFlag), a
//     file that leaves it at its default) to cwd;
//   - syscalls.profile, when it names a file, likewise;
//   - "~" and "~/..." in workspace.path, the filesystem lists and
//     syscalls.profile expanded with home.
//
// cwd must be absolute, and home too when a path uses "~". Resolve does not
// look at the file system; a relative filesystem entry is an error, as in
// Validate. Errors are *Errors. Resolving twice changes nothing.
func (p *Policy) Resolve(cwd, home string) error {
	l := &errorList{p: p}
	if !filepath.IsAbs(cwd) {
		return &Errors{{Msg: fmt.Sprintf("resolve policy: working directory %q is not absolute", cwd)}}
	}
	expand := func(field, s string) (string, bool) {
		if s != "~" && !strings.HasPrefix(s, "~/") {
			return s, true
		}
		if !filepath.IsAbs(home) {
			l.add(field, fmt.Sprintf("%q needs the home directory, which is unknown (HOME is %q)", s, home))
			return s, false
		}
		return filepath.Join(home, strings.TrimPrefix(s, "~")), true
	}
	// base is the directory relative paths in field are relative to.
	base := func(field string) string {
		if _, ok := p.flagFor(field); ok || p.Source == "" {
			return cwd
		}
		// A default the file did not write (workspace.path = ".") means
		// where moat runs, not where the policy file happens to live: a
		// shared policy must not make its own directory writable.
		if _, written := p.lines[field]; !written {
			return cwd
		}
		dir := filepath.Dir(p.Source)
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		return dir
	}

	if ws, ok := expand("workspace.path", p.Workspace.Path); ok && ws != "" {
		if !filepath.IsAbs(ws) {
			ws = filepath.Join(base("workspace.path"), ws)
		}
		p.Workspace.Path = filepath.Clean(ws)
	}
	for _, list := range []struct {
		field string
		paths []string
	}{
		{"filesystem.read_only", p.Filesystem.ReadOnly},
		{"filesystem.read_write", p.Filesystem.ReadWrite},
		{"filesystem.deny", p.Filesystem.Deny},
	} {
		for i, e := range list.paths {
			field := indexKey(list.field, i)
			x, ok := expand(field, e)
			switch {
			case !ok:
			case !filepath.IsAbs(x):
				l.add(field, fmt.Sprintf(`%q is relative; host paths must be absolute or start with "~/"`, e))
			default:
				list.paths[i] = filepath.Clean(x)
			}
		}
	}
	if prof := p.Syscalls.Profile; isProfilePath(prof) {
		if x, ok := expand("syscalls.profile", prof); ok {
			if !filepath.IsAbs(x) {
				x = filepath.Join(base("syscalls.profile"), x)
			}
			p.Syscalls.Profile = filepath.Clean(x)
		}
	}
	return l.err()
}

// ResolveAndValidate resolves p (Resolve) and validates it (Validate), and
// returns the problems of both together, as *Errors: a relative path does
// not hide a bad limit or a root uid until it is fixed. A problem both
// report is listed once.
func (p *Policy) ResolveAndValidate(cwd, home string) error {
	rerr := p.Resolve(cwd, home)
	verr := p.Validate()
	var all Errors
	seen := map[string]bool{}
	for _, err := range []error{rerr, verr} {
		var es *Errors
		if err == nil {
			continue
		}
		if !errors.As(err, &es) {
			return err
		}
		for _, fe := range *es {
			if s := fe.Error(); !seen[s] {
				seen[s] = true
				all = append(all, fe)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	return &all
}
