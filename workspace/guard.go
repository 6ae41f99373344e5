package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/moatbox/moat/internal/inputfile"
	"github.com/moatbox/moat/internal/overlay"
)

// A workspace holds files that tools on the host execute, or read as
// configuration, without a person asking for it: git runs hooks and the
// commands its config names (core.fsmonitor, a filter, an editor) on a
// plain `git status`, direnv runs .envrc on cd, editors and agents start
// the tasks and servers of their project settings, npm, yarn and cargo
// load project config that can name a program to run. A command in the
// sandbox may write the workspace, so these are what it must not plant.
//
// The Guard keeps them in a direct-mode workspace (where the command
// writes the real directory): each existing one is re-bound read-only,
// every directory above it is pinned (bound onto itself, so that it can
// neither be renamed nor removed: the kernel refuses both for a mount
// point), and one that did not exist when the run started is moved to a
// quarantine after the run, once no process of the run is alive. The git
// directory is followed as git reads it: a worktree's or submodule's
// .git file, the common directory, submodules' and worktrees' own git
// directories, core.hooksPath and config includes inside the workspace,
// and the checkouts of submodules, whose .git git status opens. A root
// without .git is itself a git directory to git when it holds a bare
// repository's layout (see gitdir.go): its entries are kept as .git's
// when it was one at the start, and a layout the run made of it is
// taken out after the run. A repository made below the top, a .git or a
// bare one, is not followed, by design: git reads it only once a person
// goes into it. ChangeSet.Apply refuses the same paths unless forced, and
// the nested repositories too.

// gitDirEntries are the entries of a git directory that decide what git
// runs or where it reads its configuration from: objects, refs, the index,
// logs and lock files stay writable, so commits work. The state of a
// rebase, a cherry-pick or a revert under way holds the todo list, whose
// exec lines git runs when a person continues it (one planted there ran
// on the host's `git rebase --continue`, found by a tester): an operation
// left stopped by a run is quarantined, and one the host left stopped
// cannot be continued in a direct run (overlay mode can, its apply asking
// for --force). lazygit reads a per-repository config there, whose pager
// it runs.
var gitDirEntries = []string{"config", "config.worktree", "commondir", "hooks", "rebase-merge", "rebase-apply", "sequencer", "lazygit.yml"}

// hostConfig are the workspace paths host tools read as configuration or
// execute on their own. Documented in the README (workspace.protect).
var hostConfig = []string{
	".gitmodules",
	".envrc", ".moat.toml",
	// mise reads each of these as the project's config (tasks, hooks, env
	// that runs commands).
	".mise.toml", "mise.toml", ".mise.local.toml", "mise.local.toml", ".mise", "mise/config.toml",
	// A project's .config holds tools' own: mise's, lefthook's (both
	// above), dotnet's tool manifest and others that name programs.
	".config",
	".vscode", ".idea", ".zed", ".devcontainer", ".helix", ".dir-locals.el", ".dir-locals-2.el",
	// Vim's and Neovim's 'exrc' reads these from the directory they
	// start in, coc.nvim its workspace's language servers' commands.
	".exrc", ".nvimrc", ".nvim.lua", ".vimrc", ".gvimrc", ".vim/coc-settings.json",
	// Read and run from the current directory by pdb, irb, R (.Renviron
	// names the profile it runs), pry, byebug, Octave, GHCi and Perl's
	// debugger.
	".pdbrc", ".irbrc", ".Rprofile", ".Renviron", ".pryrc", ".byebugrc", ".octaverc", ".ghci", ".perldb",
	// Coding agents' project settings, which start the MCP servers,
	// hooks, plugins and lint or test commands they name when the agent
	// starts in the workspace.
	".mcp.json", ".claude", ".cursor", ".gemini", ".codex",
	"opencode.json", "opencode.jsonc", ".opencode", ".crush.json", "crush.json",
	".opencode.json", ".kiro", ".amazonq", ".continue", ".continuerc.json", ".roo", ".windsurf", ".aider.conf.yml",
	".qwen", ".kilocode", ".junie",
	// Hooks that GitHub Copilot's CLI and Cline run from the project.
	".github/hooks", ".clinerules/hooks",
	// Mercurial reads .hg/hgrc-not-shared too, and a share reads the
	// hgrc of the repository its sharedpath names (where the command can
	// write one); Sapling likewise.
	".hg/hgrc-not-shared", ".hg/sharedpath", ".sl/sharedpath",
	".hg/hgrc", ".sl/config", ".jj/repo/config.toml", ".cargo/config", ".cargo/config.toml", ".npmrc", ".yarnrc", ".yarnrc.yml",
	// Git hook managers: the hook git runs reads its commands from these.
	// lefthook reads each of its names with or without the dot and
	// -local, in five formats, and the -local ones are merged over the
	// main one (and .config/lefthook*, under .config above); prek reads
	// prek.toml before the pre-commit names; lint-staged, which husky's
	// usual hook runs, its own.
	".pre-commit-config.yaml", ".pre-commit-config.yml", "prek.toml", ".husky",
	"lefthook.yml", "lefthook.yaml", "lefthook.json", "lefthook.jsonc", "lefthook.toml",
	".lefthook.yml", ".lefthook.yaml", ".lefthook.json", ".lefthook.jsonc", ".lefthook.toml",
	"lefthook-local.yml", "lefthook-local.yaml", "lefthook-local.json", "lefthook-local.jsonc", "lefthook-local.toml",
	".lefthook-local.yml", ".lefthook-local.yaml", ".lefthook-local.json", ".lefthook-local.jsonc", ".lefthook-local.toml",
	".lefthook", ".lefthook-local",
	".lintstagedrc", ".lintstagedrc.json", ".lintstagedrc.yaml", ".lintstagedrc.yml", ".lintstagedrc.js",
	".lintstagedrc.mjs", ".lintstagedrc.cjs", ".lintstagedrc.ts", ".lintstagedrc.mts", ".lintstagedrc.cts",
	"lint-staged.config.js", "lint-staged.config.mjs", "lint-staged.config.cjs",
	"lint-staged.config.ts", "lint-staged.config.mts", "lint-staged.config.cts",
	// Yarn runs the release its .yarnrc.yml's yarnPath names, and the
	// plugins it lists, at every yarn command.
	".yarn/releases", ".yarn/plugins",
	// direnv's usual .envrc sources these.
	".envrc.local", ".envrc.private",
	// Toolchain files that name programs to run: rustup runs the
	// toolchain at a rust-toolchain's path for cargo, rustc and the
	// rust-analyzer an editor starts; asdf's and mise's .tool-versions
	// takes path: entries (and mise's shell hook reads it on cd); a
	// top-level .devcontainer.json's initializeCommand runs on the host.
	"rust-toolchain", "rust-toolchain.toml", ".tool-versions", ".devcontainer.json",
	// Build tools' project settings that run programs at any command of
	// the tool, not only the project's own steps: pnpm's hooks at every
	// install, bun's preload scripts, Maven's core extensions and JVM
	// options, Bazel's status command and run wrapper.
	".pnpmfile.cjs", ".pnpmfile.mjs", "bunfig.toml",
	".mvn/extensions.xml", ".mvn/jvm.config", ".mvn/maven.config", ".bazelrc",
	// Bazel's launcher runs tools/bazel in place of itself; Bazelisk
	// fetches and runs the release (a fork's too) .bazelversion names,
	// from where .bazeliskrc says.
	"tools/bazel", ".bazelversion", ".bazeliskrc",
	// lazy.nvim's project spec, like .nvim.lua; OpenHands' setup script,
	// run when an agent's session starts in the workspace.
	".lazy.lua", ".openhands",
}

// HostConfig lists the built-in protected paths, relative to a
// workspace, the git directory's entries under .git/: what a policy's
// workspace.protect adds to.
func HostConfig() []string {
	out := make([]string, 0, len(gitDirEntries)+len(hostConfig))
	for _, e := range gitDirEntries {
		out = append(out, ".git/"+e)
	}
	return append(out, hostConfig...)
}

// Bind is a host directory outside the workspace that the sandbox needs
// at the same path: the git directory of a workspace that is a linked
// worktree or a submodule's checkout (its .git is a file naming it).
type Bind struct {
	Path     string
	ReadOnly bool
}

// Quarantined is a path a run created where a protected path belongs, and
// where it was moved.
type Quarantined struct {
	// Path is where it was: relative to the workspace, or absolute when
	// it was in a git directory outside the workspace.
	Path string `json:"path"`
	// To is where it is now, in moat's state directory; empty once it
	// was removed rather than kept there (sandbox.Report.QuarantineRemoved).
	To string `json:"to"`
	// Why says what it was: a protected path, a link on the way to one
	// that the command retargeted, a submodule's git directory.
	Why string `json:"why"`
}

// Guard is what protects one workspace for one run. NewGuard computes it
// before the run; the backend makes Pins and ReadOnly mounts (and the
// Binds); Finish, after the run, quarantines what the run planted.
type Guard struct {
	ws, real string // the workspace as the command sees it, and resolved
	start    stamp  // when the run started, as the kernel stamps inodes

	binds    []Bind
	mounts   []guardMount
	seen     map[string]bool // mount targets already listed
	absent   []route         // protected paths missing at the start
	links    []link          // symlinks on the way to protected paths
	gitdir   string          // the git directory (real path) at the start, if any
	common   string          // the common git directory (real path), if any
	gitdirs  map[string]bool // git directories under common/modules and common/worktrees at the start
	gitlinks map[string]bool // submodule checkouts (from .gitmodules) protected at the start
	objFmt   string          // extensions.objectformat of the repository
	stat     statCache       // while NewGuard looks
	absolute bool            // GuardOptions.Absolute
	topGit   bool            // the root was a bare repository's layout at the start
	topHad   []string        // the topEntries the root had at the start
	writable bool            // GuardOptions.Writable
	linkScan int             // entries protectLinksBelow looked at
	gaps     []string        // what NewGuard could not protect (Gaps)
	// modes are the permission bits of the root, its .git and the
	// directories on the way to the protected paths at the start (the
	// special bits too; modeAbsent: not there); restored the messages
	// of those Finish put back.
	modes    map[string]fs.FileMode
	acls     map[string]bool // those of modes that had a default ACL at the start
	openACLs map[string]bool // those whose default ACL let others write (openDefaultACL)
	// openAccess: those whose own ACL let others write (openAccessACL).
	openAccess map[string]bool
	// gitACLs are the git directory's directories (host paths) that had
	// an ACL at the start: the owner's, which closeGitDirs leaves.
	gitACLs  map[string]bool
	restored []string
	// pins are the roots Finish changes things below (the workspace, a
	// bound git directory), opened by NewGuard: see parentOf.
	pins map[string]pinnedDir
	// index is the git index as it was at the start, held open (git
	// replaces the file when it writes it), read by Finish only: which
	// gitlinks the run added, and which there were for it to plant a
	// checkout's .git under, are decided against it. Nil without one,
	// or for a guard resumed from its State.
	index *os.File
	// indexAt is the held index's change time and size when it was
	// opened: one written in place since (git never does) is no longer
	// the start's. indexKnown: the start's gitlinks are known (the git
	// directory had no index, or it is held).
	indexAt    stamp
	indexSize  int64
	indexKnown bool
}

type guardMount struct {
	path string
	pin  bool // bound onto itself, writable; otherwise read-only
}

// route is a protected path, rel below base (a mount point: the workspace
// or a git directory bound from outside it), whose components from first
// on did not exist at the start; with fileAtFirst, component first was a
// regular file then (where the route needs a directory), which stays the
// person's own while it is still one.
type route struct {
	base, rel   string
	first       int
	fileAtFirst bool
}

// link is a symbolic link on the way to a protected path: pinning cannot
// keep it, so Finish checks it still says what it said.
type link struct {
	base, rel, target string
}

// GuardOptions say what a Guard protects.
type GuardOptions struct {
	// Extra are paths relative to the root protected in addition to the
	// built-in list (HostConfig): a policy's workspace.protect.
	Extra []string
	// Writable says the command writes the root itself (a direct-mode
	// workspace, a read-write path); otherwise the Guard only binds an
	// outside git directory read-only, so that git works inside, and
	// protects nothing else (the root is read-only, or a change set that
	// Apply guards).
	Writable bool
	// Absolute reports quarantined paths as absolute paths rather than
	// relative to the root: for a read-write path beside the workspace.
	Absolute bool
}

// testHookGitDirFound, when set (by tests), runs in NewGuard once it has
// found the git directory, before it reads what is in it.
var testHookGitDirFound func()

// NewGuard computes the protection of root (absolute, as the command
// sees it: a workspace or a read-write directory) for a run.
func NewGuard(ws string, opts GuardOptions) (*Guard, error) {
	extra, writable := opts.Extra, opts.Writable
	g := &Guard{ws: ws, real: ws, start: coarseNow(), seen: map[string]bool{},
		gitdirs: map[string]bool{}, gitlinks: map[string]bool{}, absolute: opts.Absolute, writable: writable}
	if r, err := filepath.EvalSymlinks(ws); err == nil {
		g.real = r
	}
	// What NewGuard reads and looks at to decide what to protect goes
	// below the roots, as Finish's looks do (see lookAt), for the same
	// reason: by path, as root, it would follow a link the workspace's
	// owner (or, in a workspace written directly, an earlier run's
	// command) put on the way or swapped in. The workspace is opened
	// first; a git directory bound from outside it, once found. Without
	// Writable nothing stays open: each look opens its root anew.
	g.stat.g = g
	if writable {
		if err := g.pinRoots(map[string]string{g.ws: g.real}); err != nil {
			return nil, err
		}
	}
	gitdir, external, err := g.findGitDir()
	if err != nil {
		g.Close()
		return nil, err
	}
	if testHookGitDirFound != nil {
		testHookGitDirFound()
	}
	common := gitdir
	var cfg map[string][]string // the common git directory's config
	if gitdir != "" {
		common = g.commonDir(gitdir)
		g.gitdir, g.common = gitdir, common
		cfg = g.readGitConfig(filepath.Join(common, "config"))
		if f, ok := cfg["extensions.objectformat"]; ok {
			g.objFmt = f[len(f)-1]
		}
	}
	if writable {
		if err := g.refuseGitLinks(gitdir, common); err != nil {
			g.Close()
			return nil, err
		}
	}
	if external {
		g.binds = append(g.binds, Bind{Path: common, ReadOnly: !writable})
		if !within(common, gitdir) {
			g.binds = append(g.binds, Bind{Path: gitdir, ReadOnly: !writable})
		}
	}
	if !writable {
		g.stat = statCache{}
		return g, nil
	}
	g.modes, g.acls, g.openACLs, g.openAccess = map[string]fs.FileMode{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	g.gitACLs = map[string]bool{}
	budget := maxGitDirScan
	for _, d := range []string{g.common, g.gitdir} {
		if d != "" {
			g.recordGitACLs(d, 0, &budget)
		}
	}
	for _, rel := range []string{".", ".git"} {
		if fi, err := g.lstat(filepath.Join(g.real, rel)); err == nil && fi.IsDir() {
			g.modes[rel] = fi.Mode() & modeBits
			g.acls[rel] = hasDefaultACL(filepath.Join(g.real, rel))
			g.openACLs[rel] = openDefaultACL(filepath.Join(g.real, rel))
			g.openAccess[rel] = openAccessACL(filepath.Join(g.real, rel))
		}
	}
	binds := map[string]string{}
	for _, b := range g.binds {
		binds[b.Path] = b.Path
	}
	if err := g.pinRoots(binds); err != nil {
		return nil, err
	}
	// The git directories, as git reads them.
	gitBase := func(dir string) (base, prefix string) {
		if !external {
			rel, _ := filepath.Rel(g.real, dir)
			return g.ws, filepath.ToSlash(rel)
		}
		for _, b := range g.binds {
			if within(b.Path, dir) {
				rel, _ := filepath.Rel(b.Path, dir)
				return b.Path, filepath.ToSlash(rel)
			}
		}
		return dir, "."
	}
	dirs := []string{filepath.Join(g.real, ".git")}
	if gitdir != "" {
		dirs = []string{gitdir}
		if common != gitdir {
			dirs = append(dirs, common)
		}
		nested, _, _ := nestedGitDirs(common, g.readDir, g.lstat)
		for _, d := range nested {
			g.gitdirs[d] = true
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		base, prefix := gitBase(d)
		for _, e := range gitDirEntries {
			g.protect(base, joinRel(prefix, e), 0)
		}
	}
	if gitdir != "" && gitdir != g.real+"/.git" {
		// The .git file itself, wherever the git directory it names
		// is: rewritten, it would name one the command made.
		g.protect(g.ws, ".git", 0)
	}
	// The root itself as a bare repository (see gitdir.go), which git
	// reads as its git directory when it has no .git: its entries are
	// protected as .git's are; and Finish takes out a layout the run
	// made. Most roots have no HEAD, which the listing answers.
	for _, e := range topEntries {
		if _, err := g.stat.lstat(g.real + "/" + e); err == nil {
			g.topHad = append(g.topHad, e)
		}
	}
	if slices.Contains(g.topHad, "HEAD") && gitdir == "" && g.isGitDirBelow(g.real) {
		g.topGit = true
		for _, e := range gitDirEntries {
			g.protect(g.ws, e, 0)
		}
		// Its worktrees' and submodules' git directories too, as
		// .git's are (found by a tester: a bare workspace's
		// worktrees/NAME/commondir, rewritten, led the host's git in
		// that worktree to a config the command made).
		nested, _, _ := nestedGitDirs(g.real, g.readDir, g.lstat)
		for _, d := range nested {
			g.gitdirs[d] = true
			rel, _ := filepath.Rel(g.real, d)
			for _, e := range gitDirEntries {
				g.protect(g.ws, joinRel(filepath.ToSlash(rel), e), 0)
			}
		}
	}
	for _, rel := range append(slices.Clone(hostConfig), extra...) {
		rel = filepath.ToSlash(filepath.Clean(rel))
		g.linkScan = 0 // each protected path its own budget
		g.protect(g.ws, rel, 0)
		// The directories on its way: one the command opened to other
		// users' writes (.cargo, mode 0777) would let any of them plant
		// the protected file after the run (found by a tester).
		for d := path.Dir(rel); d != "." && d != "/" && !strings.HasPrefix(d, ".."); d = path.Dir(d) {
			if _, ok := g.modes[d]; ok {
				continue
			}
			g.modes[d] = modeAbsent
			if fi, err := g.stat.lstat(g.real + "/" + d); err == nil && fi.IsDir() {
				g.modes[d] = fi.Mode() & modeBits
				g.acls[d] = hasDefaultACL(g.real + "/" + d)
				g.openACLs[d] = openDefaultACL(g.real + "/" + d)
				g.openAccess[d] = openAccessACL(g.real + "/" + d)
			}
		}
	}
	// What git's configuration and .gitmodules point at inside the
	// workspace: a hooks directory, included config files, submodule
	// checkouts (whose .git git status follows).
	for _, p := range g.gitNamed(gitdir) {
		g.protect(g.ws, p, 0)
	}
	var modules []string
	if _, err := g.stat.lstat(g.real + "/.gitmodules"); err == nil {
		modules = submodulePaths(g.readGitConfig(filepath.Join(g.real, ".gitmodules")))
	}
	for _, p := range modules {
		g.gitlinks[p] = true
		g.protect(g.ws, p+"/.git", 0)
	}
	if common != "" {
		idx := g.indexPath(common)
		if g.index = g.openIndex(idx); g.index != nil {
			if fi, err := g.index.Stat(); err == nil {
				g.indexAt, g.indexSize, g.indexKnown = ctimeOf(fi), fi.Size(), true
			}
		} else if _, err := g.lstat(idx); errors.Is(err, fs.ErrNotExist) {
			g.indexKnown = true // no index: no gitlink at the start
		}
	}
	g.stat = statCache{}
	sort.SliceStable(g.mounts, func(i, j int) bool {
		return strings.Count(g.mounts[i].path, "/") < strings.Count(g.mounts[j].path, "/")
	})
	return g, nil
}

// Binds are the outside git directories the sandbox needs at their own
// path.
func (g *Guard) Binds() []Bind { return g.binds }

// Protection is one mount of the guard: Path (absolute, as the command
// sees it, existing when NewGuard looked) re-bound read-only, or, with
// Pin, bound onto itself writable so that it stays where it is.
type Protection struct {
	Path string
	Pin  bool
}

// Protections are the guard's mounts in mount order, parents first.
func (g *Guard) Protections() []Protection {
	out := make([]Protection, len(g.mounts))
	for i, m := range g.mounts {
		out[i] = Protection{Path: m.path, Pin: m.pin}
	}
	return out
}

// Inside reports whether a mount target is inside the workspace (or a
// bound git directory), where the sandbox always has it.
func (g *Guard) Inside(p string) bool {
	if within(g.ws, p) {
		return true
	}
	for _, b := range g.binds {
		if within(b.Path, p) {
			return true
		}
	}
	return false
}

func (g *Guard) mount(p string, pin bool) {
	if g.seen[p] {
		return
	}
	g.seen[p] = true
	g.mounts = append(g.mounts, guardMount{path: p, pin: pin})
}

// protect records what keeps rel below base: pins on the directories on
// the way, a read-only mount on rel, or, from the first component that is
// missing, an absent route for Finish. A symbolic link on the way is
// followed to where a host tool would land, and remembered.
func (g *Guard) protect(base, rel string, depth int) {
	if rel == "" || rel == "." || strings.HasPrefix(rel, "../") || rel == ".." || depth > 8 {
		return
	}
	realBase := g.hostPath(base)
	g.stat.list(realBase)
	parts := strings.Split(rel, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		p := realBase + "/" + sub // both clean: no Join (Clean) per component
		fi, err := g.stat.lstat(p)
		if err != nil {
			g.absent = append(g.absent, route{base: base, rel: rel, first: i})
			return
		}
		last := i == len(parts)-1
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := g.readlink(p)
			if err != nil {
				return
			}
			g.links = append(g.links, link{base: base, rel: sub, target: target})
			resolved, err := filepath.EvalSymlinks(p)
			if err != nil {
				// A dangling link: what it names may be created.
				resolved = filepath.Join(filepath.Dir(p), target)
				if filepath.IsAbs(target) {
					resolved = target
				}
			}
			rest := strings.Join(parts[i+1:], "/")
			if r, ok := relWithin(g.real, resolved); ok {
				g.protect(g.ws, joinRel(r, rest), depth+1)
			} else if full := filepath.Join(resolved, rest); exists(full) {
				// Outside the workspace: read-only where the sandbox has it.
				g.mount(full, false)
			}
			return
		case last:
			g.mount(filepath.Join(base, sub), false)
			if fi.IsDir() {
				g.protectLinksBelow(base, sub, depth)
			}
		case fi.IsDir():
			g.mount(filepath.Join(base, sub), true)
		default:
			// A file where a directory of the route belongs: whatever
			// replaces it is new.
			g.absent = append(g.absent, route{base: base, rel: rel, first: i, fileAtFirst: fi.Mode().IsRegular()})
			return
		}
	}
}

// maxLinkScan bounds the entries protectLinksBelow looks at for one
// protected path (and what its links lead to).
const maxLinkScan = 4096

// protectLinksBelow protects where the symbolic links in the protected
// directory rel below base lead inside the workspace: a hook or a
// setting that is a link to a workspace file (.git/hooks/pre-commit ->
// ../../scripts/pre-commit, .claude/settings.json -> ../conf/x.json) is
// run or read from there, and the read-only mount over the directory
// leaves that file writable. Subdirectories are looked at too, up to
// maxLinkScan entries in all.
func (g *Guard) protectLinksBelow(base, rel string, depth int) {
	if depth > 8 {
		return
	}
	dir := g.hostPath(base) + "/" + rel
	ents, err := g.readDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if g.linkScan++; g.linkScan > maxLinkScan {
			if g.linkScan == maxLinkScan+1 {
				g.gaps = append(g.gaps, fmt.Sprintf("the protected directory %s (host tools' configuration, or where a link in it leads) holds more than %d entries: the symbolic links past them were not followed, and the files they lead to would be writable", joinRel(g.ws, rel), maxLinkScan))
			}
			return
		}
		sub := rel + "/" + e.Name()
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			p := dir + "/" + e.Name()
			target, err := g.readlink(p)
			if err != nil {
				continue
			}
			// The target as written, not resolved: protect follows
			// each link on its way itself, and keeps those links (one
			// part-way, replaced by a directory of the command's, led
			// the hook there; found by a tester).
			named := filepath.Join(filepath.Dir(p), target)
			if filepath.IsAbs(target) {
				named = filepath.Clean(target)
			}
			if r, ok := relWithin(g.real, named); ok && r != "." {
				g.protect(g.ws, r, depth+1)
			}
		case e.IsDir():
			g.protectLinksBelow(base, sub, depth+1)
		}
	}
}

// pinRoots opens roots (each as the command sees it, to its host path)
// for Finish, and NewGuard's own looks, to work below: the workspace and
// the git directories bound from outside it. On error it closes all.
func (g *Guard) pinRoots(roots map[string]string) error {
	if g.pins == nil {
		g.pins = map[string]pinnedDir{}
	}
	for base, p := range roots {
		d, err := pinDir(p)
		if err != nil {
			g.Close()
			return fmt.Errorf("workspace guard: %w", err)
		}
		g.pins[base] = d
	}
	return nil
}

// Close releases what NewGuard opened; Finish is refused after it.
func (g *Guard) Close() {
	for _, d := range g.pins {
		d.Close()
	}
	if g.index != nil {
		g.index.Close()
	}
}

// indexPath is the git index git reads for the workspace: the git
// directory's (a .git file named it) or the common one's.
func (g *Guard) indexPath(common string) string {
	if g.gitdir != "" {
		return filepath.Join(g.gitdir, "index")
	}
	return filepath.Join(common, "index")
}

// openIndex opens the index at p below its root, if it is a regular
// file, and returns nil otherwise.
func (g *Guard) openIndex(p string) *os.File {
	d, name, err := g.lookAt(p)
	if err != nil {
		return nil
	}
	defer d.Close()
	f, err := os.OpenFile(d.join(name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil
	}
	return f
}

// startGitlinks lists the gitlinks of the index the run started with.
// known is false when they cannot be known: a guard resumed from its
// State holds no index. tampered says the held index was written in
// place since (git replaces it, never writes it in place) or cannot be
// read: what the start held is then unknown, and Finish takes every
// gitlink for one the run added.
func (g *Guard) startGitlinks() (links map[string]bool, known, tampered bool) {
	links = map[string]bool{}
	if !g.indexKnown {
		return links, false, false
	}
	if g.index == nil {
		return links, true, false
	}
	fi, err := g.index.Stat()
	if err != nil || ctimeOf(fi) != g.indexAt || fi.Size() != g.indexSize || fi.Size() > maxGitIndex {
		return links, true, true
	}
	list, err := scanGitlinks(io.NewSectionReader(g.index, 0, fi.Size()), g.objFmt)
	if err != nil {
		return links, true, true
	}
	for _, p := range list {
		links[p] = true
	}
	return links, true, false
}

// parentOf opens the directory holding base/rel (base as the command
// sees it), below base as NewGuard opened it (see openBeneath), for
// Finish to change rel there. Finish runs as the host's user (root, in
// the daemon), once no process of the run is alive, but the workspace's
// owner may still change the workspace on the host: a look by path, then
// a move or a link made by path, would follow a directory on the way
// that it swapped for a link in between, and change another user's
// files. Through the directory opened, a change lands below base, or
// not at all.
func (g *Guard) parentOf(base, rel string) (pinnedDir, error) {
	root, ok := g.pins[base]
	if !ok {
		// A git directory that is neither the workspace's nor bound
		// (baseOf's last resort): opened now, with no link on its path.
		r, err := pinDir(g.hostPath(base))
		if err != nil {
			return r, err
		}
		defer r.Close()
		root = r
	}
	return openBeneath(root, filepath.Dir(rel))
}

// The looks of Finish that decide what to move, and its reads of git's
// files, go below the roots NewGuard opened too, for the same reason as
// its changes (see parentOf): by path, as root, they would follow a link
// the workspace's owner put on the way, and tell whether a path exists
// where that user cannot look, or read a file that user cannot read.
// Each looks up the directory holding the path below its root, then the
// last component without following it.

// lookAt opens the directory holding the host path p, below the root
// NewGuard opened that holds p (or, below none, opened now with no link
// on its path: see parentOf), and returns it with p's last component.
// A root itself is looked at by path.
func (g *Guard) lookAt(p string) (pinnedDir, string, error) {
	base, rel := g.baseOf(p)
	if rel == "." {
		return pinnedDir{path: filepath.Dir(p)}, filepath.Base(p), nil
	}
	d, err := g.parentOf(base, rel)
	return d, filepath.Base(rel), err
}

// lstat is os.Lstat of the host path p, looked up below its root.
func (g *Guard) lstat(p string) (fs.FileInfo, error) {
	if base, rel := g.baseOf(p); rel != "." {
		if root, ok := g.pins[base]; ok {
			return lstatBeneath(root, rel)
		}
	}
	d, name, err := g.lookAt(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return os.Lstat(d.join(name))
}

// readlink is os.Readlink of the host path p, looked up below its root.
func (g *Guard) readlink(p string) (string, error) {
	d, name, err := g.lookAt(p)
	if err != nil {
		return "", err
	}
	defer d.Close()
	return os.Readlink(d.join(name))
}

// read reads the regular file at the host path p, looked up below its
// root, a link at p refused (see inputfile.ReadNoFollow).
func (g *Guard) read(p, what string, max int64) ([]byte, error) {
	d, name, err := g.lookAt(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return inputfile.ReadNoFollow(d.join(name), what, max)
}

// openDir opens the directory at the host path p below its root (a link
// on the way is followed while it stays below it).
func (g *Guard) openDir(p string) (pinnedDir, error) {
	base, rel := g.baseOf(p)
	root, ok := g.pins[base]
	if !ok {
		return pinDir(p) // below no root: opened with no link on its path
	}
	return openBeneath(root, rel)
}

// readDir is os.ReadDir of the directory at the host path p, opened
// below its root.
func (g *Guard) readDir(p string) ([]fs.DirEntry, error) {
	d, err := g.openDir(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return os.ReadDir(d.path)
}

// isGitDirBelow is isGitDirAt of the host path p, opened below its root.
func (g *Guard) isGitDirBelow(p string) bool {
	d, err := g.openDir(p)
	if err != nil {
		return false
	}
	defer d.Close()
	return isGitDirAt(d.path)
}

// hostPath is where a path as the command sees it is on the host: the
// workspace may be reached through a symbolic link.
func (g *Guard) hostPath(p string) string {
	if p == g.ws {
		return g.real
	}
	if r, ok := relWithin(g.ws, p); ok {
		return filepath.Join(g.real, r)
	}
	return p
}

// ExternalGitDirs returns the git directories outside the tree ws that a
// run's guard binds into the sandbox at their host paths (a linked
// worktree's or a submodule checkout's: the directory its .git file
// names, and its common directory), as NewGuard would find them now; ok
// is false when that cannot be told.
func ExternalGitDirs(ws string) (dirs []string, ok bool) {
	g := looker(ws)
	g.stat.g = g
	gitdir, external, err := g.findGitDir()
	if err != nil {
		return nil, false
	}
	if !external {
		return nil, true
	}
	return []string{g.commonDir(gitdir), gitdir}, true
}

// findGitDir returns the workspace's git directory, if it has one, and
// whether it is outside the workspace (a .git file naming it).
func (g *Guard) findGitDir() (dir string, external bool, err error) {
	dotgit := g.real + "/.git"
	g.stat.list(g.real)
	fi, err := g.stat.lstat(dotgit)
	switch {
	case err != nil:
		return "", false, nil
	case fi.IsDir():
		return dotgit, false, nil
	case !fi.Mode().IsRegular():
		return "", false, nil
	}
	target, ok := g.readGitFile(dotgit)
	if !ok {
		return "", false, nil
	}
	if r, err := filepath.EvalSymlinks(target); err == nil {
		target = r
	}
	if st, err := os.Stat(target); err != nil || !st.IsDir() {
		return "", false, fmt.Errorf("%s names the git directory %s, which is not a directory here: %w", dotgit, target, fs.ErrNotExist)
	}
	if _, ok := relWithin(g.real, target); ok {
		return target, false, nil
	}
	if target == "/" {
		return "", false, fmt.Errorf("%s names / as its git directory", dotgit)
	}
	return target, true, nil
}

// Finish quarantines, after a run and once no process of it is alive,
// what the run left where a protected path belongs: a protected path that
// was missing at the start, a link on the way to one that now says
// something else (the link is put back), a new git directory under
// modules/ or worktrees/, the .git of a submodule checkout the run
// made, and what made the root a bare repository (see finishTop).
// Everything moved goes below dir (created as needed), with the
// same relative path, so nothing is lost. An error means something could
// not be moved and is still in place.
func (g *Guard) Finish(dir string) ([]Quarantined, error) {
	if !g.writable {
		return nil, nil // the command could not write the root
	}
	q := &quarantine{dir: dir, g: g, stat: statCache{g: g}}
	for _, r := range g.absent {
		q.route(r)
	}
	for _, l := range g.links {
		q.restore(l)
	}
	common := g.common
	if fi, err := g.lstat(filepath.Join(g.real, ".git")); common == "" && err == nil && fi.IsDir() {
		common = filepath.Join(g.real, ".git") // made by the run: all of it is new
	}
	if common != "" {
		g.nestedOut(q, common)
		for _, p := range g.newGitlinks(common) {
			q.move(g.ws, p+"/.git", "the git directory of a submodule checkout the command made or added to the index")
		}
		budget := maxSpecialScan
		g.specialsOut(q, common, 0, &budget)
		if g.gitdir != "" && g.gitdir != common {
			g.specialsOut(q, g.gitdir, 0, &budget)
		}
		budget = maxGitDirScan
		g.closeGitDirs(common, 0, &budget)
		if g.gitdir != "" && g.gitdir != common {
			g.closeGitDirs(g.gitdir, 0, &budget)
		}
	}
	if !g.topGit {
		g.finishTop(q)
	} else if common == "" {
		// The root is the git directory: what the command added where
		// it keeps its worktrees' and submodules' goes, as from .git.
		g.nestedOut(q, g.real)
	}
	g.topSpecialsOut(q)
	g.restoreModes()
	return q.done, errors.Join(q.errs...)
}

// nestedOut quarantines the entries of each git directory the command
// added where git keeps submodules' and worktrees' (common's modules/ and
// worktrees/): git would take one for a submodule's on its next update,
// and run its config and hooks. A walk cut short (the command made more
// than it looks through: a repository's own submodules are far fewer)
// takes modules/ out whole, the host's submodules' directories with it
// (they are in the quarantine), rather than leave what it did not see.
func (g *Guard) nestedOut(q *quarantine, common string) {
	// A link the run put where git keeps nested git directories leads
	// git, and the walk below, wherever it says: it goes, not what it
	// leads to.
	for _, sub := range []string{"modules", "worktrees"} {
		p := filepath.Join(common, sub)
		if fi, err := g.lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 && !ctimeOf(fi).before(g.start) {
			base, rel := g.baseOf(p)
			q.move(base, rel, "a link the command made where git keeps nested git directories")
		}
	}
	dirs, links, cut := nestedGitDirs(common, g.readDir, g.lstat)
	for _, l := range links {
		// A link the command made where git looks for a submodule's
		// git directory leads git to one it planted anywhere.
		if fi, err := g.lstat(l); err == nil && !ctimeOf(fi).before(g.start) {
			base, rel := g.baseOf(l)
			q.move(base, rel, "a link the command made where git keeps a submodule's git directory")
		}
	}
	if cut {
		for _, sub := range []string{"modules", "worktrees"} {
			p := filepath.Join(common, sub)
			if _, err := g.lstat(p); err != nil {
				continue
			}
			base, rel := g.baseOf(p)
			q.move(base, rel, fmt.Sprintf("more git directories or links where git keeps submodules' and worktrees' than moat looks through (%d, %d deep, %d directories): git could take any of them for one", maxNestedGitDirs, maxNestedDepth, maxNestedWalk))
		}
	}
	for _, d := range dirs {
		if g.gitdirs[d] || cut && !within(filepath.Join(common, "worktrees"), d) {
			continue
		}
		base, rel := g.baseOf(d)
		for _, e := range gitDirEntries {
			if _, err := g.lstat(filepath.Join(d, e)); err == nil {
				q.move(base, joinRel(rel, e), "a git directory the command added")
			}
		}
	}
}

// modeBits are the bits of a directory's mode restoreModes puts back:
// the permissions, and setgid and sticky (a shared group's directory).
const modeBits = fs.ModePerm | fs.ModeSetgid | fs.ModeSticky

// modeAbsent is, in Guard.modes, a directory that was not there: made by
// the command, it keeps its bits but other users' write. It has no bit
// of modeBits.
const modeAbsent fs.FileMode = fs.ModeDir

// restoreModes puts back the permission bits of the root, of its .git and
// of the directories on the way to the protected paths where the command
// let other users write them, and removes a default ACL it gave them: any user of the host could then swap in
// hooks that the owner's git runs, or plant a protected file (found by
// testers). One the command replaced with a link is left alone (the
// link's target is not the directory it was). Restored says so.
func (g *Guard) restoreModes() {
	root, ok := g.pins[g.ws]
	if !ok {
		return
	}
	for _, rel := range slices.Sorted(maps.Keys(g.modes)) {
		was := g.modes[rel]
		if rel != "." {
			if fi, err := g.lstat(filepath.Join(g.real, rel)); err != nil || !fi.IsDir() {
				continue
			}
		}
		d := root
		if rel != "." {
			var err error
			if d, err = openBeneath(root, rel); err != nil {
				continue
			}
		}
		if fi, err := os.Stat(d.self()); err == nil && fi.IsDir() && fi.Mode().Perm()&0o022&^was.Perm() != 0 {
			if was == modeAbsent {
				was = fi.Mode() & modeBits &^ 0o022
			}
			if os.Chmod(d.self(), was) == nil {
				g.restored = append(g.restored, fmt.Sprintf("the command let other users write %s (mode %04o): put back to %04o", joinRel(g.ws, rel), fi.Mode().Perm(), was.Perm()))
			}
		}
		// A default ACL the command gave it would open every file and
		// directory the owner makes there later to whom it names,
		// whatever the owner's umask (found by a tester).
		if !g.openAccess[rel] && openAccessACL(d.self()) && removeAccessACL(d.self()) == nil {
			g.restored = append(g.restored, fmt.Sprintf("the command gave %s an ACL that lets other users write it: removed", joinRel(g.ws, rel)))
		}
		if (!g.acls[rel] && hasDefaultACL(d.self()) || !g.openACLs[rel] && openDefaultACL(d.self())) && removeDefaultACL(d.self()) == nil {
			g.restored = append(g.restored, fmt.Sprintf("the command gave %s a default ACL, which what is made there later would inherit: removed", joinRel(g.ws, rel)))
		}
		if rel != "." {
			d.Close()
		}
	}
}

// closeGitDirs takes back, in the git directory dir and below it, what
// the command opened to other users on a directory it changed: write for
// others, a named user's or group's write in its ACL, and a default ACL
// that grants it (to other, or a named user or group), which every file
// git makes there later would inherit (a tester's .git/modules let
// another user plant the hooks of a submodule added afterwards, and
// rewrite refs). Objects are left alone (their names are their content's
// hash). It looks at maxGitDirScan directories at most, those git runs
// or reads refs from first, and says so when it stops short.
func (g *Guard) closeGitDirs(dir string, depth int, budget *int) {
	if *budget--; *budget < 0 {
		if *budget == -1 {
			g.restored = append(g.restored, fmt.Sprintf("%s has more than %d directories: those past them were not looked at for other users' write", dir, maxGitDirScan))
		}
		return
	}
	if depth > 8 {
		return
	}
	d, err := g.openDir(dir)
	if err != nil {
		return
	}
	if fi, err := os.Lstat(d.self()); err == nil && fi.IsDir() && !ctimeOf(fi).before(g.start) {
		// The group's write is left: with a group of the owner's own, as
		// most are, it is the owner's, and a shared repository's has it.
		if fi.Mode().Perm()&0o002 != 0 && os.Chmod(d.self(), fi.Mode()&modeBits&^0o002) == nil {
			g.restored = append(g.restored, fmt.Sprintf("the command let other users write %s (mode %04o): put back to %04o", dir, fi.Mode().Perm(), fi.Mode().Perm()&^0o002))
		}
		// An ACL it had at the start is the owner's (a repository shared
		// through one), left as it is.
		if !g.gitACLs[dir] && openAccessACL(d.self()) && removeAccessACL(d.self()) == nil {
			g.restored = append(g.restored, fmt.Sprintf("%s has an ACL that lets other users write it: removed", dir))
		}
		if !g.gitACLs[dir] && openDefaultACL(d.self()) && removeDefaultACL(d.self()) == nil {
			g.restored = append(g.restored, fmt.Sprintf("%s has a default ACL that lets other users write what git makes there later: removed", dir))
		}
	}
	ents, err := os.ReadDir(d.path)
	d.Close()
	if err != nil {
		return
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && e.Name() != "objects" {
			dirs = append(dirs, e.Name())
		}
	}
	// What git runs and reads refs from first, whatever their names sort
	// after (a directory of thousands of logs ran the budget out).
	first := map[string]int{"hooks": 1, "modules": 2, "worktrees": 3, "refs": 4, "info": 5}
	slices.SortStableFunc(dirs, func(a, b string) int {
		ra, rb := first[a], first[b]
		switch {
		case ra != 0 && rb != 0:
			return ra - rb
		case ra != 0:
			return -1
		case rb != 0:
			return 1
		}
		return 0
	})
	for _, name := range dirs {
		g.closeGitDirs(filepath.Join(dir, name), depth+1, budget)
	}
}

// recordGitACLs notes, before the run, the directories of the git
// directory dir (objects aside) that have an ACL: a repository shared
// through one keeps it, though git changes those directories in a run.
func (g *Guard) recordGitACLs(dir string, depth int, budget *int) {
	if *budget--; *budget < 0 || depth > 8 {
		return
	}
	if hasAnyACL(dir) {
		g.gitACLs[dir] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() && e.Name() != "objects" {
			g.recordGitACLs(filepath.Join(dir, e.Name()), depth+1, budget)
		}
	}
}

// maxGitDirScan bounds the directories closeGitDirs looks at in one
// Finish.
const maxGitDirScan = 4096

// Gaps says what NewGuard could not protect: a run refuses to start
// with any, unless degraded.
func (g *Guard) Gaps() []string { return g.gaps }

// Restored says what Finish put back: the modes of the root and its .git
// the command had opened to other users' writes.
func (g *Guard) Restored() []string { return g.restored }

// maxSpecialScan bounds the entries specialsOut looks at in one Finish.
const maxSpecialScan = 4096

// specialsOut quarantines the FIFOs and sockets the command left where
// git reads files, in the git directory dir and its refs: git on the
// host opens HEAD, the index, packed-refs and the refs, and waits on a
// FIFO there for ever (a `git status`, a shell prompt that shows the
// branch; found by a tester). Objects, logs and the rest are left alone,
// and so is what lies past the first maxSpecialScan entries.
func (g *Guard) specialsOut(q *quarantine, dir string, depth int, budget *int) {
	ents, err := g.readDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if *budget--; *budget < 0 {
			return
		}
		p := filepath.Join(dir, e.Name())
		switch {
		case e.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0:
			base, rel := g.baseOf(p)
			q.move(base, rel, "a FIFO, socket or device where git reads a file: git on the host would wait on it")
		case e.Type()&fs.ModeSymlink != 0:
			// git follows a link there (HEAD -> ../fifo) and opens what
			// it names (found by a reviewer).
			if fi, err := os.Stat(p); err == nil && fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0 {
				base, rel := g.baseOf(p)
				q.move(base, rel, "a link to a FIFO, socket or device where git reads a file: git on the host would wait on it")
			}
		case e.IsDir() && (depth == 0 && (e.Name() == "refs" || e.Name() == "info") || depth > 0 && depth < 16):
			g.specialsOut(q, p, depth+1, budget)
		}
	}
}

// gitReadsTop are the files of a worktree's top that git opens for any
// status or diff.
var gitReadsTop = []string{".gitignore", ".gitattributes", ".mailmap"}

// topSpecialsOut quarantines a FIFO, socket or device the command left at
// gitReadsTop: git on the host would wait on it for ever (found by a
// tester). git does not follow a link there (since 2.32). The same names
// in subdirectories are not looked at (that would walk the whole
// workspace at every run's end).
func (g *Guard) topSpecialsOut(q *quarantine) {
	for _, name := range gitReadsTop {
		if fi, err := g.lstat(g.real + "/" + name); err == nil && fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			q.move(g.ws, name, "a FIFO, socket or device where git reads a file: git on the host would wait on it")
		}
	}
}

// topEntries are the entries of a root that make it a bare repository,
// or that decide what git runs in one: gitDirLayout and gitDirEntries, each once.
var topEntries = []string{"HEAD", "objects", "refs", "commondir", "config", "config.worktree", "hooks", "rebase-merge", "rebase-apply", "sequencer"}

// finishTop takes out what made the root, which was no git directory at
// the start, a bare repository that git would read (no .git there that
// git reads first): the entries of topEntries the run created, and, if
// it still is one (the root had those), its HEAD, since without a valid
// HEAD the layout is none. What the root had is the person's and stays.
func (g *Guard) finishTop(q *quarantine) {
	dotgit := filepath.Join(g.real, ".git")
	if fi, err := g.lstat(dotgit); err == nil && !fi.IsDir() || g.isGitDirBelow(dotgit) || !g.isGitDirBelow(g.real) {
		return
	}
	const why = "an entry of a bare repository the command made of the root, which git reads as its git directory"
	for _, e := range topEntries {
		if _, err := g.lstat(g.real + "/" + e); err == nil && !slices.Contains(g.topHad, e) {
			q.move(g.ws, e, why)
		}
	}
	if g.isGitDirBelow(g.real) {
		q.move(g.ws, "HEAD", why)
	}
}

// baseOf splits a host path below the workspace or a bound git directory
// into that base (as the command sees it) and the rest.
func (g *Guard) baseOf(p string) (base, rel string) {
	if r, ok := relWithin(g.real, p); ok {
		return g.ws, r
	}
	for _, b := range g.binds {
		if r, ok := relWithin(b.Path, p); ok {
			return b.Path, r
		}
	}
	return filepath.Dir(p), filepath.Base(p)
}

// newGitlinks lists submodule checkouts whose .git the run created or
// changed: paths the index records as gitlinks or .gitmodules names, that
// were not protected at the start; and the checkouts of gitlinks the run
// added to the index, whatever their .git's age (one a command planted in
// an earlier run, as an untracked nested repository that git status does
// not open, is opened once the index names it). git status opens each
// one's .git and runs git there.
func (g *Guard) newGitlinks(common string) []string {
	var paths []string
	if b, err := g.read(filepath.Join(g.real, ".gitmodules"), "git config", maxGitConfig); err == nil {
		paths = submodulePaths(parseGitConfig(b))
	}
	// The gitlinks of the index at the start: a checkout's .git the run
	// made under one of them counts as under any gitlink, and one of
	// the index now that is not among them was added by the run.
	before, known, tampered := g.startGitlinks()
	for p := range before {
		paths = append(paths, p)
	}
	// The git directory found at the start: the .git file that named it
	// was the person's, and a .git the run made is common (a directory).
	index := g.indexPath(common)
	// A split index (git update-index --split-index) keeps entries in
	// sharedindex.* files beside the index, in the same format. The
	// index names one; which, this reader does not tell, so it reads
	// them all, whatever their age: an old one may hold what the index
	// names now. With one, what the start held is not known from the
	// index alone, and every gitlink is taken for one the run added.
	var shared []string
	if ents, err := g.readDir(filepath.Dir(index)); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "sharedindex.") {
				shared = append(shared, filepath.Join(filepath.Dir(index), e.Name()))
			}
		}
	}
	split := len(shared) > 0
	// An index this reader cannot read may still be one git reads, and
	// past maxSharedIndexes (git keeps one in use, and a few old ones
	// until it expires them) reading each costs more than a walk: every
	// .git below the top is then a candidate, whatever its age, found by
	// one walk of the workspace however many such files the run left.
	walk := len(shared) > maxSharedIndexes
	if walk {
		shared = nil
	}
	added := map[string]bool{}
	addAll := tampered || split
	for i, f := range append([]string{index}, shared...) {
		fi, err := g.lstat(f)
		if err != nil {
			if i > 0 || !errors.Is(err, fs.ErrNotExist) {
				walk = true
			}
			continue
		}
		if i == 0 && ctimeOf(fi).before(g.start) && !split {
			continue // the start's: its gitlinks are before's
		}
		var links []string
		err = errors.New("not a regular file")
		if idx := g.openIndex(f); idx != nil {
			links, err = scanGitlinks(io.LimitReader(idx, maxGitIndex), g.objFmt)
			idx.Close()
		}
		if err != nil {
			walk = true
			continue
		}
		paths = append(paths, links...)
		for _, p := range links {
			if addAll || known && !before[p] {
				added[p] = true
			}
		}
	}
	if addAll {
		for p := range before {
			added[p] = true
		}
	}
	if walk {
		for _, p := range g.dotGitsSince(true) {
			paths = append(paths, p)
			added[p] = true
		}
	}
	var out []string
	for _, p := range paths {
		if g.gitlinks[p] || slices.Contains(out, p) {
			continue
		}
		dotgit := filepath.Join(g.real, p, ".git")
		fi, err := g.lstat(dotgit)
		if errors.Is(err, syscall.EXDEV) {
			// A link on the way leads out of the workspace, where
			// nothing is looked at: the move takes that link, if the
			// run made it (see linkOut).
			out = append(out, p)
			continue
		}
		if err != nil {
			continue
		}
		if added[p] || !ctimeOf(fi).before(g.start) || (fi.IsDir() && changedInside(dotgit, g.start, g.lstat)) {
			out = append(out, p)
		}
	}
	return out
}

// maxSharedIndexes bounds the split index files newGitlinks reads.
const maxSharedIndexes = 16

// testHookDotGitsSince, when set (by tests), runs at each dotGitsSince.
var testHookDotGitsSince func()

// dotGitsSince lists the directories below the workspace's top that
// hold a .git made or changed since the run started, or, with all, any
// .git: the fallback when the index cannot be read for its gitlinks. It
// walks the whole workspace, which only a run that left an index this
// package cannot read pays for.
func (g *Guard) dotGitsSince(all bool) []string {
	if testHookDotGitsSince != nil {
		testHookDotGitsSince()
	}
	var out []string
	// Each directory is opened below the workspace NewGuard opened (see
	// readDir): one its owner swaps for a link meanwhile does not lead
	// the walk, as root, into a directory that user cannot read.
	var walk func(rel string)
	walk = func(rel string) {
		dir := g.real
		if rel != "." {
			dir += "/" + rel
		}
		ents, err := g.readDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			p := dir + "/" + e.Name()
			if e.Name() != ".git" || rel == "." {
				if e.IsDir() {
					walk(joinRel(rel, e.Name()))
				}
				continue
			}
			if fi, err := g.lstat(p); err == nil && (all || !ctimeOf(fi).before(g.start) || fi.IsDir() && changedInside(p, g.start, g.lstat)) {
				out = append(out, rel)
			}
		}
	}
	walk(".")
	return out
}

// changedInside reports whether an entry of git directory d that decides
// what git runs changed since t, looked at with lstat.
func changedInside(d string, t stamp, lstat func(string) (fs.FileInfo, error)) bool {
	for _, e := range gitDirEntries {
		if fi, err := lstat(filepath.Join(d, e)); err == nil && !ctimeOf(fi).before(t) {
			return true
		}
	}
	return false
}

type quarantine struct {
	dir  string
	g    *Guard
	stat statCache // cleared by every move
	done []Quarantined
	errs []error // one for each path that could not be moved
}

// fail records that something could not be moved (or a link restored):
// the other paths are still moved, and every failure is reported.
func (q *quarantine) fail(err error) { q.errs = append(q.errs, err) }

// restore puts back link l if it no longer says what it said, moving
// what took its place to the quarantine.
func (q *quarantine) restore(l link) {
	p := filepath.Join(q.g.hostPath(l.base), l.rel)
	parent, err := q.g.parentOf(l.base, l.rel)
	if err != nil {
		q.fail(fmt.Errorf("restore link %s: %w", p, err))
		return
	}
	defer parent.Close()
	at := parent.join(filepath.Base(l.rel))
	if t, err := os.Readlink(at); err == nil && t == l.target {
		return
	}
	if _, err := os.Lstat(at); err == nil {
		q.move(l.base, l.rel, "a link on the way to a protected path, changed by the command")
	}
	if err := os.Symlink(l.target, at); err != nil {
		q.fail(fmt.Errorf("restore link %s: %w", p, err))
	}
}

// route quarantines what the run made of an absent route: walking from
// its first missing component, a link or a file where a directory
// belongs, or the protected path itself.
func (q *quarantine) route(r route) {
	parts := strings.Split(r.rel, "/")
	realBase := q.g.hostPath(r.base)
	q.stat.list(realBase)
	for i := r.first; i < len(parts); i++ {
		sub := strings.Join(parts[:i+1], "/")
		fi, err := q.stat.lstat(realBase + "/" + sub)
		if err != nil {
			return
		}
		if i == len(parts)-1 {
			q.move(r.base, sub, "a protected path the command created")
			return
		}
		if i == r.first && r.fileAtFirst && fi.Mode().IsRegular() {
			return // the file that was there at the start, or another: no route through it
		}
		if !fi.IsDir() {
			q.move(r.base, sub, "a link or file where a protected path's directory belongs")
			return
		}
	}
}

// bareError is err without the paths an *os.PathError or *os.LinkError
// adds: those name what the command made, raw, and the error that wraps
// it names the path once, quoted.
func bareError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// move takes base/rel (base as the command sees it) out of the workspace
// into the quarantine: renamed where the state directory is on the same
// file system, else copied and removed.
func (q *quarantine) move(base, rel, why string) {
	path := filepath.Join(q.g.hostPath(base), rel)
	if link, out := q.g.linkOut(base, rel); out {
		// The path leads out of base through a link: what is there is
		// not the run's (the command could not write it) and is never
		// moved, as the host's user (root, in the daemon) could move
		// any file. The link goes instead if the run made it.
		if link != "" {
			q.move(base, link, "a link the command made, leading out of the workspace on the way to a protected path")
		}
		return
	}
	shown := rel
	if base != q.g.ws || q.g.absolute {
		shown = filepath.Join(base, rel)
	}
	for _, d := range q.done {
		if d.Path == shown {
			return
		}
	}
	// The quarantine keeps the path it came from: below the root's own
	// name for the root, below "outside" and the full path for a git
	// directory bound from elsewhere.
	dst := filepath.Join(q.dir, filepath.Base(q.g.ws), rel)
	if base != q.g.ws {
		dst = filepath.Join(q.dir, "outside", base, rel)
	}
	parent, err := q.g.parentOf(base, rel)
	if err != nil {
		q.fail(fmt.Errorf("quarantine %s: %w", QuoteName(path), bareError(err)))
		return
	}
	defer parent.Close()
	src := parent.join(filepath.Base(rel))
	err = os.MkdirAll(filepath.Dir(dst), 0o700)
	if err == nil {
		err = os.Rename(src, dst)
		if errors.Is(err, fs.ErrPermission) {
			err = renameWritable(parent, filepath.Base(rel), dst, err)
		}
		if errors.Is(err, syscall.EXDEV) {
			err = copyOut(src, dst)
		}
	}
	if err != nil {
		q.fail(fmt.Errorf("quarantine %s: %w", QuoteName(path), bareError(err)))
		return
	}
	q.done = append(q.done, Quarantined{Path: shown, To: dst, Why: why})
	q.stat = statCache{g: q.g}
}

// linkOut reports whether the directory holding base/rel (base as the
// command sees it) lies outside base, reached through a symbolic link
// below it, and then names that link relative to base if the run made it
// (its ctime is not before the start), or "" if it was there before.
// It looks below base as NewGuard opened it (see parentOf): the kernel
// refuses (EXDEV) a lookup that a link leads out of it, and nothing
// outside is looked at. Finish runs once no process of the run is alive,
// but the workspace's owner may still change the tree on the host after
// this look: the move itself then stays below base, or fails.
func (g *Guard) linkOut(base, rel string) (link string, out bool) {
	d, err := g.parentOf(base, rel)
	if err == nil {
		d.Close()
		return "", false
	}
	if !errors.Is(err, syscall.EXDEV) {
		return "", false // nothing there to move: the move says so
	}
	hb := g.hostPath(base)
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i := range parts[:len(parts)-1] {
		sub := strings.Join(parts[:i+1], "/")
		p := hb + "/" + sub
		fi, err := g.lstat(p)
		if err != nil {
			break
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if !ctimeOf(fi).before(g.start) {
			return sub, true
		}
		// The person's own link: one that names a place inside base
		// by its absolute path is not out (the kernel refuses it all
		// the same, and the move says so).
		if pd, name, err := g.lookAt(p); err == nil {
			t, err := os.Readlink(pd.join(name))
			pd.Close()
			if err == nil && filepath.IsAbs(t) && (within(hb, filepath.Clean(t)) || within(base, filepath.Clean(t))) {
				return "", false
			}
		}
		break
	}
	return "", true
}

// statCache remembers lstat results: protected paths share their first
// components (.git, .cargo), and most do not exist, so one lstat answers
// for many routes. It also lists a root's entries once (see list), so
// that a name missing there costs no system call at all.
type statCache struct {
	results map[string]statResult
	names   map[string]map[string]bool // a listed directory's entries
	// g, when set (in Finish), has paths looked up below the roots it
	// opened (see Guard.lstat).
	g *Guard
}

type statResult struct {
	fi  fs.FileInfo
	err error
}

// listLimit bounds the entries list reads: past it, a root is not listed
// and each name costs an lstat, as it would anyway.
const listLimit = 1024

// list reads dir's entry names, when it has at most listLimit of them.
// One open and a getdents or two take the place of an lstat per
// protected name, most of which a workspace lacks. It reads with plain
// system calls: os.Open would also try to register the directory with
// Go's poller.
func (c *statCache) list(dir string) {
	if c.names == nil {
		c.names = map[string]map[string]bool{}
	}
	if _, ok := c.names[dir]; ok {
		return
	}
	c.names[dir] = nil
	at := dir
	if c.g != nil {
		d, err := c.g.openDir(dir)
		if err != nil {
			return
		}
		defer d.Close()
		at = d.path
	}
	fd, err := syscall.Open(at, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer syscall.Close(fd)
	var buf [8192]byte
	var names []string
	for len(names) <= listLimit {
		n, err := syscall.ReadDirent(fd, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		if n <= 0 {
			set := make(map[string]bool, len(names))
			for _, name := range names {
				set[name] = true
			}
			c.names[dir] = set
			return
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}

func (c *statCache) lstat(p string) (fs.FileInfo, error) {
	if r, ok := c.results[p]; ok {
		return r.fi, r.err
	}
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		if set := c.names[p[:i]]; set != nil && !set[p[i+1:]] {
			return nil, &fs.PathError{Op: "lstat", Path: p, Err: fs.ErrNotExist}
		}
	}
	lstat := os.Lstat
	if c.g != nil {
		lstat = c.g.lstat
	}
	fi, err := lstat(p)
	if c.results == nil {
		c.results = map[string]statResult{}
	}
	c.results[p] = statResult{fi, err}
	return fi, err
}

// copyOut copies src (a file, link or tree; set-id bits dropped) to dst
// and removes src.
func copyOut(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		if err := copyTree(context.Background(), src, dst, false, 0); err != nil {
			return err
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(t, dst); err != nil {
			return err
		}
	case fi.Mode().IsRegular():
		if err := overlay.CopyFile(src, dst, fi.Mode().Perm(), true); err != nil {
			return err
		}
	}
	return os.RemoveAll(src)
}

// GitLinkError is NewGuard's refusal of a workspace written in place
// whose .git, git config or .gitmodules is a symbolic link.
type GitLinkError struct {
	Path string // the link, on the host
}

func (e *GitLinkError) Error() string {
	return e.Path + " is a symbolic link: moat does not follow it to learn what git on the host runs from the workspace " +
		"(a hooks path its config names), so a command could plant what git then runs; replace the link by what it leads to " +
		"(a .git file, \"gitdir: PATH\", names a git directory elsewhere), or use --workspace-mode overlay or readonly"
}

// refuseGitLinks refuses a writable root whose .git (when no git
// directory was found), common git config or .gitmodules is a link.
// Git on the host follows such a link, and what the file it leads to
// names in the workspace (core.hooksPath, a submodule's checkout) is
// what git runs or trusts there; the guard reads git's files only below
// their roots and never through a link at the file itself (as root, in
// the daemon, it would read what the workspace's owner may not), so it
// cannot know what to protect, and protecting nothing would fail open.
func (g *Guard) refuseGitLinks(gitdir, common string) error {
	var check []string
	if gitdir == "" {
		check = append(check, g.real+"/.git")
	} else {
		check = append(check, filepath.Join(common, "config"))
	}
	check = append(check, g.real+"/.gitmodules")
	for _, p := range check {
		if fi, err := g.lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return &GitLinkError{Path: p}
		}
	}
	return nil
}

// readGitFile reads a .git file ("gitdir: PATH") at the host path p,
// below its root (see Guard.read), returning the git directory it names,
// made absolute.
func (g *Guard) readGitFile(p string) (string, bool) {
	b, err := g.read(p, "git file", 4096)
	if err != nil {
		return "", false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	dir, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "gitdir: ")
	if !ok || dir == "" {
		return "", false
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(p), dir)
	}
	return filepath.Clean(dir), true
}

// commonDir is the git directory whose config, hooks and objects dir
// shares (a linked worktree's points at the main one's), resolved; dir
// itself when it has no commondir file. commondir is read below its root.
func (g *Guard) commonDir(dir string) string {
	b, err := g.read(filepath.Join(dir, "commondir"), "git file", 4096)
	if err != nil {
		return dir
	}
	c := strings.TrimSpace(string(b))
	if c == "" {
		return dir
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(dir, c)
	}
	if r, err := filepath.EvalSymlinks(c); err == nil {
		return r
	}
	return filepath.Clean(c)
}

// nestedGitDirs lists the git directories of submodules (modules/, to any
// depth, nested submodules included) and linked worktrees (worktrees/*)
// of common: each has its own config or commondir and hooks; and the links
// in modules/, which git follows to a git directory. A git
// directory is told by its HEAD, a file or a link (git follows one into
// refs/). It looks with readDir and lstat (by path, or below the guard's
// roots), at most maxNestedGitDirs of them, maxNestedDepth deep, through
// maxNestedWalk directories: cut says it stopped short, with more to see.
func nestedGitDirs(common string, readDir func(string) ([]fs.DirEntry, error), lstat func(string) (fs.FileInfo, error)) (out, links []string, cut bool) {
	walked := 0
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		if cut {
			return
		}
		ents, err := readDir(dir)
		if err != nil {
			// A directory that may not be listed (mode 0111) may still
			// be passed through by name, as git does to a submodule's
			// git directory beneath it: what it holds is not seen.
			if errors.Is(err, fs.ErrPermission) {
				cut = true
			}
			return
		}
		for _, e := range ents {
			if e.Type()&fs.ModeSymlink != 0 {
				// Git follows it to a git directory anywhere.
				if len(links) >= maxNestedGitDirs {
					cut = true
					return
				}
				links = append(links, filepath.Join(dir, e.Name()))
				continue
			}
			if !e.IsDir() {
				continue
			}
			if depth >= maxNestedDepth || len(out) >= maxNestedGitDirs || walked >= maxNestedWalk {
				cut = true
				return
			}
			walked++
			p := filepath.Join(dir, e.Name())
			if fi, err := lstat(filepath.Join(p, "HEAD")); err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0) {
				out = append(out, p)
				walk(filepath.Join(p, "modules"), depth+1)
				continue
			}
			walk(p, depth+1) // a submodule's name may have slashes
		}
	}
	walk(filepath.Join(common, "modules"), 0)
	if ents, err := readDir(filepath.Join(common, "worktrees")); err == nil {
		for _, e := range ents {
			switch {
			case e.IsDir():
				out = append(out, filepath.Join(common, "worktrees", e.Name()))
			case e.Type()&fs.ModeSymlink != 0 && len(links) < maxNestedGitDirs:
				links = append(links, filepath.Join(common, "worktrees", e.Name()))
			case e.Type()&fs.ModeSymlink != 0:
				cut = true
			}
		}
	}
	return out, links, cut
}

// The bounds of nestedGitDirs' walk: far beyond a repository's
// submodules, and what a command that makes more is refused (Finish).
const (
	maxNestedGitDirs = 4096
	maxNestedDepth   = 16
	maxNestedWalk    = 65536
)

// submodulePaths lists the submodule paths .gitmodules (its variables,
// as readGitConfig returns them) names, relative and inside the
// workspace.
func submodulePaths(vars map[string][]string) []string {
	var out []string
	for k, vs := range vars {
		if !strings.HasPrefix(k, "submodule.") || !strings.HasSuffix(k, ".path") {
			continue
		}
		for _, v := range vs {
			v = filepath.ToSlash(filepath.Clean(v))
			if v != "." && !filepath.IsAbs(v) && v != ".." && !strings.HasPrefix(v, "../") {
				out = append(out, v)
			}
		}
	}
	sort.Strings(out)
	return out
}

// readGitConfig reads the variables of the git config file at the host
// path p, below its root (see Guard.read), as "section.subsection.key"
// (section and key lower-cased, as git compares them) to their values.
// It reads what this package needs to find paths, not every corner of
// the format: a value it cannot read is left out, which only leaves a
// path unprotected that the mounts of the git directory's own entries
// do not already cover.
func (g *Guard) readGitConfig(p string) map[string][]string {
	b, err := g.read(p, "git config", maxGitConfig)
	if err != nil {
		return map[string][]string{}
	}
	return parseGitConfig(b)
}

// The most this package reads of a git config file and of a git index.
const (
	maxGitConfig = 1 << 20
	maxGitIndex  = 256 << 20
)

// parseGitConfig is readGitConfig of the content b.
func parseGitConfig(b []byte) map[string][]string {
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.LastIndexByte(line, ']')
			if end < 0 {
				section = ""
				continue
			}
			head := line[1:end]
			name, sub, hasSub := strings.Cut(head, " ")
			section = strings.ToLower(name)
			if hasSub {
				section += "." + strings.Trim(strings.TrimSpace(sub), `"`)
			} else if i := strings.IndexByte(name, '.'); i >= 0 {
				section = strings.ToLower(name[:i]) + name[i:]
			}
			line = strings.TrimSpace(line[end+1:])
			if line == "" {
				continue
			}
		}
		key, val, hasVal := strings.Cut(line, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if !hasVal || section == "" || key == "" {
			continue
		}
		out[section+"."+key] = append(out[section+"."+key], configValue(val))
	}
	return out
}

// configValue is a git config value without its comment and quotes.
func configValue(v string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(v[i])
			}
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}

// readGitlinks lists the paths a git index records as gitlinks (mode
// 160000: submodule checkouts). It reads index versions 2 to 4; objFmt is
// the repository's object format ("sha256" or empty for SHA-1).
func readGitlinks(p, objFmt string) ([]string, error) {
	b, err := inputfile.Read(p, "git index", maxGitIndex)
	if err != nil {
		return nil, err
	}
	return scanGitlinks(bytes.NewReader(b), objFmt)
}

// scanGitlinks is readGitlinks of what r reads, read through a small
// buffer: an index names every file of the repository, and Finish reads
// one at every run's end, where a buffer the size of the index would be
// fresh memory faulted in page by page (costly on the virtual machines
// docs/performance.md describes). Names are strings only for gitlinks.
func scanGitlinks(r io.Reader, objFmt string) ([]string, error) {
	br := bufio.NewReaderSize(r, 32<<10)
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || string(hdr[:4]) != "DIRC" {
		return nil, errors.New("not a git index")
	}
	be32 := func(x []byte) uint32 { return uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3]) }
	version, n := be32(hdr[4:]), be32(hdr[8:])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("git index version %d", version)
	}
	hashLen := 20
	if strings.EqualFold(objFmt, "sha256") {
		hashLen = 32
	}
	fixed := 40 + hashLen + 2
	var ent [40 + 32 + 2 + 2]byte
	var out []string
	var prev, name []byte
	// readName reads up to and past the next NUL into buf's end.
	readName := func(buf []byte) ([]byte, error) {
		for {
			part, err := br.ReadSlice(0)
			buf = append(buf, part...)
			switch err {
			case nil:
				return buf[:len(buf)-1], nil
			case bufio.ErrBufferFull:
				if len(buf) > 1<<16 {
					return nil, errors.New("bad git index entry")
				}
				continue
			}
			return nil, io.ErrUnexpectedEOF
		}
	}
	for i := uint32(0); i < n; i++ {
		size := fixed
		if _, err := io.ReadFull(br, ent[:fixed]); err != nil {
			return nil, io.ErrUnexpectedEOF
		}
		mode := be32(ent[24:])
		flags := uint16(ent[40+hashLen])<<8 | uint16(ent[41+hashLen])
		if version >= 3 && flags&0x4000 != 0 {
			if _, err := io.ReadFull(br, ent[fixed:fixed+2]); err != nil {
				return nil, io.ErrUnexpectedEOF
			}
			size += 2
		}
		var err error
		if version == 4 {
			strip, ok := streamVarint(br)
			if !ok || strip > uint64(len(prev)) {
				return nil, errors.New("bad git index entry")
			}
			if prev, err = readName(prev[:len(prev)-int(strip)]); err != nil {
				return nil, err
			}
			name = prev
		} else {
			if name, err = readName(name[:0]); err != nil {
				return nil, err
			}
			// Entries are padded with NULs to a multiple of 8 bytes, one
			// NUL at least (read with the name).
			if _, err := br.Discard((size+len(name)+8)&^7 - size - len(name) - 1); err != nil {
				return nil, io.ErrUnexpectedEOF
			}
		}
		if mode&0o170000 == 0o160000 {
			out = append(out, string(name))
		}
	}
	return out, nil
}

// streamVarint decodes the offset-style variable-length integer of git's
// index version 4 from br.
func streamVarint(br *bufio.Reader) (uint64, bool) {
	c, err := br.ReadByte()
	if err != nil {
		return 0, false
	}
	v := uint64(c & 127)
	for i := 1; c&128 != 0; i++ {
		if i > 9 {
			return 0, false
		}
		if c, err = br.ReadByte(); err != nil {
			return 0, false
		}
		v = ((v + 1) << 7) | uint64(c&127)
	}
	return v, true
}

// within reports whether p is dir or below it (both clean and absolute).
func within(dir, p string) bool {
	_, ok := relWithin(dir, p)
	return ok
}

// relWithin returns p relative to dir, slash-separated, if p is dir or
// below it.
func relWithin(dir, p string) (string, bool) {
	r, err := filepath.Rel(dir, p)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", false
	}
	return filepath.ToSlash(r), true
}

func joinRel(a, b string) string {
	switch {
	case a == "" || a == ".":
		return b
	case b == "" || b == ".":
		return a
	}
	return a + "/" + b
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// Protects reports whether applying ch would change something a host tool
// executes or reads as configuration: a path of HostConfig or of a run's
// protect list (Command.Protect), at or below; an entry of a submodule's
// or worktree's git directory that decides what git runs; .git itself
// made something else than a directory; a .git anywhere below the top
// (a nested repository or a submodule's checkout, which git status
// enters); and what the workspace's git config names inside the
// workspace (core.hooksPath, included files).
func (c *ChangeSet) Protects(ch Change) bool { return c.protects()(ch) }

// protects is Protects with the workspace's git config read once.
func (c *ChangeSet) protects() func(Change) bool {
	named := looker(c.Workspace()).configNamed(false)
	list := append(HostConfig(), c.Protected()...)
	list = append(list, linkedProtections(c.Workspace(), list, named)...)
	return func(ch Change) bool { return protects(ch, list, named) }
}

// linkedProtections are the paths inside the workspace ws, as it is on
// the host, that its protected paths lead to through symbolic links, as
// the Guard of a direct run follows them (.git/config -> ../repo.gitconfig,
// .git/hooks -> ../scripts/hooks, .envrc -> conf/envrc, and the links
// inside a protected directory): an apply that writes there plants what
// git or direnv runs, as surely as one that writes the protected path.
func linkedProtections(ws string, lists ...[]string) []string {
	g := looker(ws)
	g.seen = map[string]bool{}
	g.stat.g = g
	for _, l := range lists {
		for _, rel := range l {
			g.protect(g.ws, filepath.ToSlash(filepath.Clean(rel)), 0)
		}
	}
	var out []string
	for _, m := range g.mounts {
		if r, ok := relWithin(g.ws, m.path); ok && !m.pin && r != "." {
			out = append(out, r)
		}
	}
	// A dangling link's target, which the apply could create.
	for _, a := range g.absent {
		if a.base == g.ws {
			out = append(out, a.rel)
		}
	}
	return out
}

func protects(ch Change, list, named []string) bool {
	p := ch.Path
	if p == ".git" {
		return ch.Type != Dir || ch.Kind == Deleted
	}
	for _, q := range list {
		q = filepath.ToSlash(filepath.Clean(q))
		if under(p, q) {
			return true
		}
		// A directory above a protected path made something else (a
		// link, a file): what the protected path names is then wherever
		// the new entry leads (scripts replaced by a link to a directory
		// of the command's, below which git finds its hooks; found by a
		// tester).
		if under(q, p) && ch.Type != Dir && ch.Kind != Deleted {
			return true
		}
	}
	for _, q := range named {
		if under(q, p) && ch.Type != Dir && ch.Kind != Deleted {
			return true
		}
	}
	return gitProtects(p, named)
}

// GitProtected reports whether rel (clean, slash-separated, relative to
// the workspace ws) is a git path beyond HostConfig's that Protects
// refuses (a .git below the top, an entry of a submodule's or worktree's
// git directory that decides what git runs, what the workspace's git
// config names inside it), or a directory above one the config names.
// The config is read on each call: it names the paths as they are now.
//
// When git reads the root itself as its git directory (a bare repository,
// or a git directory given as the workspace: no .git there that git reads
// first), its config, hooks and the other entries git runs from are
// refused as .git's are, and so is its HEAD, which makes the root one
// (found by a tester: the files API wrote hooks/pre-commit and config
// into a workspace that was a git directory, and the host's git status
// ran what it named).
func GitProtected(ws, rel string) bool {
	g := looker(ws)
	if g.rootLayout(rel) {
		return true
	}
	named := g.configNamed(true)
	if top, _, _ := strings.Cut(rel, "/"); (top == "worktrees" || top == "modules") && g.rootIsGitDir() && gitProtects(".git/"+rel, named) {
		return true // a bare root's nested git directories, as .git's
	}
	for _, q := range named {
		if under(q, rel) {
			return true
		}
	}
	return gitProtects(rel, named)
}

// rootLayout reports whether rel, at the root or below an entry of it,
// is in the layout git reads as the root's own git directory (see
// GitProtected): the root has no .git that git reads first, and rel is
// its HEAD, or an entry of gitDirEntries while the root is a git
// directory.
func (g *Guard) rootLayout(rel string) bool {
	top, _, _ := strings.Cut(rel, "/")
	if top != "HEAD" && !slices.Contains(gitDirEntries, top) {
		return false
	}
	if g.readsDotGit() {
		return false
	}
	return top == "HEAD" || g.isGitDirBelow(g.real)
}

// readsDotGit says whether git, run at the root, reads a .git there (a
// git directory, or a file naming one) before the root itself.
func (g *Guard) readsDotGit() bool {
	dotgit := filepath.Join(g.real, ".git")
	fi, err := g.lstat(dotgit)
	return err == nil && !fi.IsDir() || g.isGitDirBelow(dotgit)
}

// rootIsGitDir says whether git reads the root itself as its git
// directory: no .git there that it reads first, and a git directory's
// layout.
func (g *Guard) rootIsGitDir() bool {
	return !g.readsDotGit() && g.isGitDirBelow(g.real)
}

func gitProtects(p string, named []string) bool {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if part == ".git" && i > 0 {
			return true
		}
	}
	if len(parts) > 3 && parts[0] == ".git" && (parts[1] == "modules" || parts[1] == "worktrees") {
		for _, part := range parts[3:] {
			if slices.Contains(gitDirEntries, part) {
				return true
			}
		}
	}
	for _, q := range named {
		if under(p, q) {
			return true
		}
	}
	return false
}

// looker is a Guard that only looks, outside a run: at a workspace's git
// files for Protects and GitProtected. It opens no root ahead: each look
// opens the directory of the root it is below anew, with no link on its
// path (see parentOf), and the looks go below it as Finish's do. Run as
// root (the daemon), by path they would follow a link the workspace's
// owner put on the way and read a config that user cannot read, which
// would decide what is refused.
func looker(ws string) *Guard {
	g := &Guard{ws: ws, real: ws}
	if r, err := filepath.EvalSymlinks(ws); err == nil {
		g.real = r
	}
	return g
}

// configNamed is gitNamed for the workspace's .git directory or, with
// gitFile, the git directory a .git file names (a linked worktree's or a
// submodule's checkout).
func (g *Guard) configNamed(gitFile bool) []string {
	gitdir := filepath.Join(g.real, ".git")
	if gitFile {
		if d, ok := g.readGitFile(gitdir); ok {
			gitdir = d
			if r, err := filepath.EvalSymlinks(d); err == nil {
				gitdir = r // opened with no link on its path
			}
		}
	}
	return g.gitNamed(gitdir)
}
