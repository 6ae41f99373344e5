package workspace

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// A git directory needs no .git in its name: git's discovery, walking up
// from where it runs, takes any directory that holds a valid HEAD and
// objects and refs (is_git_directory in git's setup.c) for a bare
// repository (safe.bareRepository defaults to "all"), and reads its
// config, which can name a pager, an fsmonitor, aliases or hooks. So a
// change set that makes such a layout (git init --bare sub, or the same
// files written by hand) plants a config as surely as a .git below the
// top does, at the top of a workspace without .git as well as below it.
//
// Apply looks at what it would leave: for each directory that a selected
// change touches a layout entry of, whether it is a git directory once
// the selected changes land (the workspace as it is, with the selection
// over it), and whether it was one before. It refuses, unless forced, the
// changes that make one (the directory itself when the change set makes
// it, what is at or below its HEAD, objects, refs) and, in any git
// directory, those at or below the entries that decide what git runs
// (gitDirEntries), as it does for the top .git's. Only directories a change
// reaches through one of those names are looked at, each once: a few
// lstats each, on top of the walk Apply already makes.

// gitDirLayout are the entries that make a directory a git directory:
// HEAD, and objects and refs there or in the directory commondir names.
var gitDirLayout = []string{"HEAD", "objects", "refs", "commondir"}

// gitDirChanges returns what of sel, the selected changes, a git
// directory the selection makes or changes makes Apply refuse.
func (c *ChangeSet) gitDirChanges(sel []Change) func(Change) bool {
	v := resultView{c: c}
	type state struct{ after, before bool }
	dirs := map[string]state{}
	look := func(d string) state {
		st, ok := dirs[d]
		if !ok {
			if v.sel == nil { // most change sets never get here
				v.sel = make(map[string]Change, len(sel))
				for _, ch := range sel {
					v.sel[ch.Path] = ch
				}
			}
			// The workspace's own .git is guarded entry by entry
			// (HostConfig, gitProtects), as git reads it.
			if d != ".git" && !strings.HasPrefix(d, ".git/") {
				if st.after = v.isGitDir(d, true); st.after {
					st.before = v.isGitDir(d, false)
				}
			}
			dirs[d] = st
		}
		return st
	}
	guarded := map[string]bool{} // refused paths, at or below
	made := map[string]bool{}    // directories made git directories
	for _, ch := range sel {
		p := ch.Path
		for start := 0; start < len(p); {
			end := strings.IndexByte(p[start:], '/')
			if end < 0 {
				end = len(p)
			} else {
				end += start
			}
			name := p[start:end]
			entry := slices.Contains(gitDirEntries, name)
			if entry || slices.Contains(gitDirLayout, name) {
				d := "."
				if start > 0 {
					d = p[:start-1]
				}
				if st := look(d); st.after && (entry || !st.before) {
					guarded[p[:end]] = true
					if !st.before && d != "." {
						made[d] = true
					}
				}
			}
			start = end + 1
		}
	}
	if len(guarded) == 0 {
		return func(Change) bool { return false }
	}
	return func(ch Change) bool {
		if made[ch.Path] {
			return true
		}
		for q := ch.Path; ; q = path.Dir(q) {
			if guarded[q] {
				return true
			}
			if q == "." {
				return false
			}
		}
	}
}

// resultView reads the workspace as an Apply of the selected changes sel
// would leave it (after), or as it is (before).
type resultView struct {
	c   *ChangeSet
	sel map[string]Change
}

// lstat is the entry at rel, and the path it is read at; nil when absent.
func (v resultView) lstat(rel string, after bool) (fs.FileInfo, string) {
	p := v.c.real(rel)
	if after {
		if ch, ok := v.sel[rel]; ok {
			if ch.Kind == Deleted || ch.Type == Special {
				return nil, "" // removed, or never applied
			}
			p = v.c.upperOf(rel)
		} else {
			for a := path.Dir(rel); a != "."; a = path.Dir(a) {
				if ch, ok := v.sel[a]; ok && (ch.Kind == Deleted || ch.Kind == TypeChanged) {
					return nil, "" // removed with its directory
				}
			}
		}
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, ""
	}
	return fi, p
}

// isGitDir is isGitDirectory on the directory rel.
func (v resultView) isGitDir(rel string, after bool) bool {
	return isGitDirectory(func(name string) (fs.FileInfo, string) { return v.lstat(path.Join(rel, name), after) })
}

// isGitDirAt is isGitDirectory on the directory dir as it is.
func isGitDirAt(dir string) bool {
	return isGitDirectory(func(name string) (fs.FileInfo, string) {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, ""
		}
		return fi, p
	})
}

// isGitDirectory is is_git_directory of git's setup.c on a directory
// whose entry name lstat returns (nil when absent) with the path to read
// it at. A commondir with a valid HEAD is taken for one without following
// it: it may lead anywhere, and an ordinary project has no such pair.
func isGitDirectory(lstat func(name string) (fs.FileInfo, string)) bool {
	fi, p := lstat("HEAD")
	if testHookHeadLooked != nil {
		testHookHeadLooked(p)
	}
	if fi == nil || !validHead(p) {
		return false
	}
	if fi, _ := lstat("commondir"); fi != nil {
		return true
	}
	for _, e := range []string{"objects", "refs"} {
		fi, _ := lstat(e)
		// git asks access(X_OK), which follows a link (where it leads is
		// not followed here: it counts as there) and passes an
		// executable file.
		if fi == nil || !(fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 || fi.Mode().IsRegular() && fi.Mode()&0o111 != 0) {
			return false
		}
	}
	return true
}

// testHookHeadLooked, when set (by tests), runs between the look at a
// HEAD and its read.
var testHookHeadLooked func(p string)

// validHead is validate_headref of git on the HEAD at p: a link into
// refs/, or a file that starts with "ref: refs/" or an object name in
// hex. HEAD is looked up once, without following a link and without
// blocking, and what was looked up is what is read: one swapped for a
// link or a pipe since an earlier look is judged as it is now, never
// as what it was.
func validHead(p string) bool {
	target, isLink, head, err := readNoFollow(p, 255) // what git reads of it
	if err != nil {
		return false
	}
	if isLink {
		return strings.HasPrefix(target, "refs/")
	}
	b := string(head)
	if ref, ok := strings.CutPrefix(b, "ref:"); ok {
		return strings.HasPrefix(strings.TrimLeft(ref, " \t\n\r"), "refs/")
	}
	const sha1Hex = 40 // a SHA-256 name starts with as many hex digits
	if len(b) < sha1Hex {
		return false
	}
	for i := 0; i < sha1Hex; i++ {
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(b[i])) {
			return false
		}
	}
	return true
}
