package workspace

import (
	"path"
	"strings"
	"testing"
)

// matchAnyByPrefixes is matchAny as the rules define it: every prefix of
// the path tried against every pattern, a name for a pattern without "/",
// the whole prefix for one with it.
func matchAnyByPrefixes(patterns []string, p string, isDir bool) string {
	for _, pat := range patterns {
		dirOnly := strings.HasSuffix(pat, "/")
		pat = strings.TrimSuffix(pat, "/")
		anchored := strings.Contains(pat, "/")
		pat = strings.TrimPrefix(pat, "/")
		parts := strings.Split(p, "/")
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			if dirOnly && i == len(parts)-1 && !isDir {
				break
			}
			subject := parts[i]
			if anchored {
				subject = prefix
			}
			if ok, _ := path.Match(pat, subject); ok {
				return prefix
			}
		}
	}
	return ""
}

// TestMatchAnySameAsPrefixes checks the quick matchAny against the rules,
// character classes that match a slash and directory-only patterns
// included.
func TestMatchAnySameAsPrefixes(t *testing.T) {
	patterns := []string{
		"node_modules", "node_modules/", "*.log", "/build", "build/out", "/a/b/",
		"a[/]b", "a[^x]b/c", "a?b", "*/*", "/*", "x/*/z", "[", "d/d/d",
		"/src/*.go", "*",
	}
	paths := []string{
		"node_modules", "a/node_modules/x", "x.log", "a/b/x.log", "build", "src/build",
		"build/out/f", "a/b", "a/b/c", "axb/c", "a/b/c/d", "a/bb", "x/y/z", "x/y/z/w",
		"d/d/d/d/d", "src/main.go", "src/a/main.go", "[", "f", "a//b",
	}
	for _, pat := range patterns {
		for _, p := range paths {
			for _, dir := range []bool{false, true} {
				want := matchAnyByPrefixes([]string{pat}, p, dir)
				if got := matchAny([]string{pat}, p, dir); got != want {
					t.Errorf("matchAny(%q, %q, dir %v) = %q, want %q", pat, p, dir, got, want)
				}
			}
		}
	}
	if got := matchAny(DefaultCollapse, "a/.venv/lib/x.py", false); got != "a/.venv" {
		t.Errorf("DefaultCollapse: got %q", got)
	}
}

// BenchmarkSelectDeep is the review's filter over a change set nested
// deep, one change per level: it must grow with the square of the depth
// at most (every change's path is that long), not its cube.
func BenchmarkSelectDeep(b *testing.B) {
	var changes []Change
	p := "d"
	for range 1500 {
		changes = append(changes, Change{Path: p, Kind: Added, Type: Dir})
		p += "/d"
	}
	f := Filter{Exclude: []string{"/build/", "*.log"}}
	for b.Loop() {
		f.Select(changes)
	}
}

// TestPlural: the summary's counts read as git's: "1 file changed, 1
// insertion(+)" (it said "1 files", "1 insertions").
func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 files", 1: "1 file", 2: "2 files"} {
		if got := plural(n, "file"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
