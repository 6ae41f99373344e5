package workspace

import (
	"os"
	"os/user"

	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/moatbox/moat/internal/inputfile"
)

// What a git config names in the workspace. Git on the host runs what
// its configuration names: the hooks in core.hooksPath, and the programs
// of keys such as core.fsmonitor, a filter's clean and smudge commands or
// a shell alias. When one of those lies in the workspace, a command in
// the sandbox could write it, and git would run it on the host. Every
// config git reads in a repository the workspace is part of is looked at:
// the repository's own (config, config.worktree), those of the
// repositories above the workspace (it may be a subdirectory of a larger
// checkout, itself inside another), the global and system files, and
// what each includes, as git resolves their paths: relative to the
// worktree's top (hooks, commands) or to the including file (includes),
// "~" for a home directory, symbolic links followed.

// gitHooks are the names git runs from a hooks directory: with
// core.hooksPath naming the workspace's root, these are the paths to
// keep there.
var gitHooks = []string{
	"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
	"prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge",
	"pre-push", "pre-receive", "update", "proc-receive", "post-receive", "post-update",
	"reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate",
	"fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist", "p4-post-changelist",
	"p4-pre-submit", "post-index-change",
}

// commandKey reports whether the git config key k names a program git
// runs (its value a shell command, or a path).
func commandKey(k string) bool {
	switch k {
	case "core.fsmonitor", "core.sshcommand", "core.pager", "core.editor", "core.askpass",
		"core.gitproxy", "core.alternaterefscommand",
		"sequence.editor", "gpg.program", "credential.helper", "diff.external",
		"interactive.difffilter", "uploadpack.packobjectshook", "imap.tunnel":
		return true
	}
	section, rest, _ := strings.Cut(k, ".")
	key := rest[strings.LastIndexByte(rest, '.')+1:]
	switch section {
	case "alias", "submodule":
		// Only a value that starts with "!" runs a command (see
		// commandPath): an alias, a submodule's update.
		return section == "alias" || key == "update"
	case "filter":
		return key == "clean" || key == "smudge" || key == "process"
	case "diff":
		return key == "textconv" || key == "command"
	case "merge":
		return key == "driver"
	case "difftool", "mergetool", "browser", "man", "guitool":
		return key == "cmd" || key == "path"
	case "remote":
		return key == "uploadpack" || key == "receivepack"
	case "trailer":
		return key == "command" || key == "cmd"
	case "hook":
		return key == "command"
	case "sendemail":
		// smtpServer runs as sendmail when it is a path.
		return key == "sendmailcmd" || key == "tocmd" || key == "cccmd" || key == "headercmd" || key == "smtpserver"
	case "pager", "credential", "gpg":
		return key == "helper" || key == "program" || key == "defaultkeycommand" || section == "pager"
	}
	return false
}

// commandPath is the program a command value names when it is a path
// (holds a slash), "" otherwise (found in PATH, or none). An alias or a
// submodule's update runs one only with a leading "!".
func commandPath(key, v string) string {
	if strings.HasPrefix(key, "alias.") || strings.HasPrefix(key, "submodule.") {
		var ok bool
		if v, ok = strings.CutPrefix(v, "!"); !ok {
			return ""
		}
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	var word string
	if q := v[0]; q == '"' || q == '\'' {
		word, _, _ = strings.Cut(v[1:], string(q))
	} else {
		word = strings.Fields(v)[0]
	}
	if !strings.Contains(word, "/") {
		return ""
	}
	return word
}

// configNamer collects what the configs it reads name inside real.
type configNamer struct {
	g     *Guard
	real  string
	homes []string
	out   map[string]bool
	seen  map[string]bool // config files read, with their top
}

func newConfigNamer(g *Guard) *configNamer {
	n := &configNamer{g: g, real: g.real, out: map[string]bool{}, seen: map[string]bool{}}
	if h, err := os.UserHomeDir(); err == nil {
		n.homes = append(n.homes, h)
	}
	// The workspace's owner runs git there, with a home of its own.
	if fi, err := os.Stat(g.real); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil && u.HomeDir != "" && !slices.Contains(n.homes, u.HomeDir) {
				n.homes = append(n.homes, u.HomeDir)
			}
		}
	}
	return n
}

// list is what was named, sorted.
func (n *configNamer) list() []string {
	out := make([]string, 0, len(n.out))
	for p := range n.out {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// candidates are the host paths p may be, relative to relTo: one per
// home a leading "~" may stand for.
func (n *configNamer) candidates(p, relTo string) []string {
	switch {
	case p == "":
		return nil
	case p == "~" || strings.HasPrefix(p, "~/"):
		var out []string
		for _, h := range n.homes {
			out = append(out, filepath.Join(h, p[1:]))
		}
		return out
	case strings.HasPrefix(p, "~"):
		name, rest, _ := strings.Cut(p[1:], "/")
		u, err := user.Lookup(name)
		if err != nil {
			return nil
		}
		return []string{filepath.Join(u.HomeDir, rest)}
	case !filepath.IsAbs(p):
		return []string{filepath.Join(relTo, p)}
	}
	return []string{filepath.Clean(p)}
}

// inside is the workspace-relative path of the host path p, as it is
// written or with the symbolic links of the part of it that exists
// followed; ok is false when it is outside.
func (n *configNamer) inside(p string) (string, bool) {
	if r, ok := relWithin(n.real, p); ok {
		return r, true
	}
	rest := ""
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			if r, ok := relWithin(n.real, filepath.Join(r, rest)); ok {
				return r, true
			}
			return "", false
		}
		if q == "/" || q == "." {
			return "", false
		}
		rest = filepath.Join(filepath.Base(q), rest)
	}
}

// add records the host path p (relative to relTo) when it is inside the
// workspace; hooks says it is a hooks directory, which at the root
// stands for the hooks' own names.
func (n *configNamer) add(p, relTo string, hooks bool) {
	for _, c := range n.candidates(p, relTo) {
		r, ok := n.inside(c)
		switch {
		case !ok:
		case r == "." && hooks:
			for _, h := range gitHooks {
				n.out[h] = true
			}
		case r != ".":
			n.out[r] = true
		}
	}
}

// read reads the config file at the host path file of a repository whose
// worktree's top is top, and what it includes (depth bounds a chain).
// A repository's own config is read as the guard reads the files it
// protects (below its root, never through a link at the file: as root,
// the daemon would read what the workspace's owner pointed it at); with
// follow, as git reads it: the global and system files, and included
// files outside the workspace, are the host's (a dotfiles manager's
// ~/.gitconfig is a link), and one not read would leave what it names
// unprotected.
func (n *configNamer) read(file, top string, depth int, follow bool) {
	if depth > 8 || n.seen[file+"\x00"+top] || len(n.seen) > 256 {
		return
	}
	n.seen[file+"\x00"+top] = true
	vals := map[string][]string{}
	if _, inside := relWithin(n.real, file); follow && !inside {
		if b, err := inputfile.Read(file, "git config", maxGitConfig); err == nil {
			vals = parseGitConfig(b)
		}
	} else {
		vals = n.g.readGitConfig(file)
	}
	for _, p := range vals["core.hookspath"] {
		n.add(p, top, true)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case k == "include.path" || strings.HasPrefix(k, "includeif.") && strings.HasSuffix(k, ".path"):
			for _, p := range vals[k] {
				n.add(p, filepath.Dir(file), false)
				for _, c := range n.candidates(p, filepath.Dir(file)) {
					n.read(c, top, depth+1, true)
				}
			}
		case commandKey(k):
			for _, v := range vals[k] {
				if p := commandPath(k, v); p != "" {
					n.add(p, top, false)
				}
			}
		}
	}
}

// repo reads the configs of the repository whose git directory is
// gitdir and whose worktree's top is top.
func (n *configNamer) repo(gitdir, top string) {
	common := n.g.commonDir(gitdir)
	n.read(filepath.Join(common, "config"), top, 0, false)
	n.read(filepath.Join(gitdir, "config.worktree"), top, 0, false)
	if common != gitdir {
		n.read(filepath.Join(common, "config.worktree"), top, 0, false)
	}
}

// global reads the global and system configs, for a repository whose
// worktree's top is top.
func (n *configNamer) global(top string) {
	var files []string
	if f := os.Getenv("GIT_CONFIG_GLOBAL"); f != "" {
		files = append(files, f)
	}
	for _, h := range n.homes {
		files = append(files, filepath.Join(h, ".gitconfig"), filepath.Join(h, ".config", "git", "config"))
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		files = append(files, filepath.Join(x, "git", "config"))
	}
	if f := os.Getenv("GIT_CONFIG_SYSTEM"); f != "" {
		files = append(files, f)
	}
	files = append(files, "/etc/gitconfig")
	for _, f := range files {
		n.read(f, top, 0, true)
	}
}

// enclosing reads the configs of every repository above the workspace
// (git finds the nearest from a directory of the workspace; from further
// up, a person's git finds the others), and returns their tops.
func (n *configNamer) enclosing() []string {
	var tops []string
	for d := filepath.Dir(n.real); ; d = filepath.Dir(d) {
		dotgit := filepath.Join(d, ".git")
		if fi, err := n.g.lstat(dotgit); err == nil {
			gitdir := ""
			switch {
			case fi.IsDir():
				gitdir = dotgit
			case fi.Mode().IsRegular():
				gitdir, _ = n.g.readGitFile(dotgit)
			}
			if gitdir != "" {
				n.repo(gitdir, d)
				tops = append(tops, d)
			}
		}
		if d == "/" || d == "." || len(tops) > 16 {
			return tops
		}
	}
}

// gitNamed is what every git config that applies to the workspace names
// inside it (see the top of this file); gitdir is the workspace's own
// git directory, "" when it has none.
func (g *Guard) gitNamed(gitdir string) []string {
	n := newConfigNamer(g)
	if gitdir != "" {
		n.repo(gitdir, g.real)
	}
	tops := append([]string{g.real}, n.enclosing()...)
	for _, top := range tops {
		n.global(top)
	}
	return n.list()
}
