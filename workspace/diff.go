package workspace

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Format is an output format of WriteDiff.
type Format string

const (
	// Summary: one line per change (A added, M modified or mode change,
	// D deleted, R renamed, T type changed) with +/- line counts, then a
	// total, like `git diff --stat`. Names are quoted as QuoteName does;
	// a change's Notice is given in parentheses, and a file that runs
	// although it is not valid text, or that is an executable binary, is
	// called so.
	Summary Format = "summary"
	// Unified: a git-style unified text diff for reading; binary files are
	// named, not shown; directory-level changes and warnings are "#"
	// comment lines. Names are quoted as QuoteName does and lines escaped
	// as EscapeText does (tabs and line ends kept), with a warning for a
	// file that has escapes. A file that can run (any execute bit, a "#!"
	// line, a script's name) is shown as text even when a byte makes it
	// look binary, and an executable binary is named as one, with its size
	// and SHA-256.
	Unified Format = "unified"
	// Patch: what `git apply` accepts on a clean checkout of the
	// workspace: git headers, modes, symlinks as mode 120000, binary files
	// as "GIT binary patch" literals, exact renames. Collapse is ignored
	// (every change is written). Git tracks neither directories nor
	// permission bits other than the owner's execute bit, so empty
	// directories and such mode changes are left out. Names are quoted
	// by git's rules; a text file with a control character other than a
	// tab or a line end (CR LF included) in it is written as a binary
	// literal too, so that the patch is exact for git and yet prints
	// nothing a terminal would act on.
	Patch Format = "patch"
	// JSON: one object {"workspace", "changes": [...], "files_changed",
	// "insertions", "deletions"}. Collapse is ignored (every change is
	// listed). encoding/json would turn bytes that are not UTF-8 into
	// U+FFFD, so a name or target that is not UTF-8 also comes as its
	// raw bytes, base64-encoded, in path_bytes, target_bytes,
	// old_target_bytes, renamed_to_bytes (and workspace_bytes).
	JSON Format = "json"
)

// DiffOptions says how WriteDiff presents changes.
type DiffOptions struct {
	Format Format // Summary when empty
	Filter Filter // Exclude always applies; Collapse not to Patch or JSON
	// Context is the number of context lines of text diffs; 0 means 3.
	Context int
}

// WriteDiff writes changes (from Changes) in the format opts asks for.
// The summary and the unified diff end with a line that says how many
// changes the filter excluded (ExcludedNote), since apply takes them too.
func (c *ChangeSet) WriteDiff(w io.Writer, changes []Change, opts DiffOptions) error {
	// Changes refuses such a set already; this also covers changes that
	// came from elsewhere, since the diff reads the upper directory.
	if err := c.CheckComplete(); err != nil {
		return err
	}
	if opts.Context <= 0 {
		opts.Context = 3
	}
	f := opts.Filter
	if opts.Format == Patch || opts.Format == JSON {
		f.Collapse = []string{}
	}
	excluded, notices := f.Excluded(changes)
	changes = f.Select(changes)
	d := differ{upper: resolvedRoot(c.UpperDir()), lower: resolvedRoot(c.meta.Workspace), ctx: opts.Context}
	bw := bufio.NewWriter(w)
	var err error
	switch opts.Format {
	case Summary, "":
		err = d.summary(bw, changes)
	case Unified, Patch:
		err = d.patch(bw, changes, opts.Format == Patch)
	case JSON:
		err = d.json(bw, changes)
	default:
		return fmt.Errorf("diff format %q: use summary, unified, patch or json", opts.Format)
	}
	if err != nil {
		return err
	}
	// Said where a person reads: a patch is for git apply, JSON for a
	// program (their callers say it beside).
	if note := ExcludedNote(excluded, notices); note != "" && (opts.Format == Summary || opts.Format == Unified || opts.Format == "") {
		fmt.Fprintf(bw, "moat: %s\n", note)
	}
	return bw.Flush()
}

type differ struct {
	upper, lower string
	ctx          int
}

// fileDiff is one git-style file section: old and new side, either may be
// absent (mode 0).
type fileDiff struct {
	oldPath, newPath string
	oldMode, newMode uint32 // git modes: 0100644, 0100755, 0120000
	oldExec, newExec bool   // any execute bit (git keeps only the owner's)
	oldSrc, newSrc   string // file to read, or the symlink target
	rename           bool
}

const (
	gitFile    = 0o100644
	gitExec    = 0o100755
	gitSymlink = 0o120000
)

// shortOctal is Octal without a leading 0: 755, 1777.
func shortOctal(m fs.FileMode) string { return strings.TrimPrefix(Octal(m), "0") }

func gitMode(t Type, perm fs.FileMode) uint32 {
	switch {
	case t == Symlink:
		return gitSymlink
	case perm&0o100 != 0:
		return gitExec
	}
	return gitFile
}

// maxReviewRead is the largest file the review reads whole to compare
// and show. The command chooses what the change set holds, and a sparse
// file costs it no disk: a diff that read each file whole would take the
// reviewer's (or the daemon's) memory and time in proportion to sizes the
// command made up. A larger file is classified by its head and shown by
// its size only.
const maxReviewRead = 32 << 20

// ErrTooLarge is a patch (Format Patch) asked of a change set with a file
// over what the review reads.
var ErrTooLarge = errors.New("too large for a patch")

// read returns the old (or new) side's content, and whether it is whole:
// of a file over maxReviewRead only the head (sniffLen bytes) is read,
// and size says how large it is.
func (fd *fileDiff) read(old bool) (data []byte, whole bool, size int64, err error) {
	mode, src := fd.newMode, fd.newSrc
	if old {
		mode, src = fd.oldMode, fd.oldSrc
	}
	switch mode {
	case 0:
		return nil, true, 0, nil
	case gitSymlink:
		return []byte(src), true, int64(len(src)), nil
	}
	f, err := openReview(src, false)
	if err != nil {
		return nil, false, 0, fmt.Errorf("diff: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, 0, fmt.Errorf("diff: %w", err)
	}
	n := fi.Size()
	if n > maxReviewRead {
		b, err := io.ReadAll(io.LimitReader(f, sniffLen))
		if err != nil {
			return nil, false, n, fmt.Errorf("diff: %w", err)
		}
		return b, false, n, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxReviewRead+1))
	if err != nil {
		return nil, false, n, fmt.Errorf("diff: %w", err)
	}
	if len(b) > maxReviewRead {
		return b[:sniffLen], false, int64(len(b)), nil // it grew as it was read
	}
	return b, true, int64(len(b)), nil
}

func (d *differ) up(p string) string  { return filepath.Join(d.upper, filepath.FromSlash(p)) }
func (d *differ) low(p string) string { return filepath.Join(d.lower, filepath.FromSlash(p)) }

// fileDiffs turns one change into git file sections.
func (d *differ) fileDiffs(ch Change) ([]fileDiff, error) {
	if ch.Collapsed || ch.Type == Special {
		return nil, nil
	}
	var out []fileDiff
	oldType := ch.Type
	if ch.Kind == TypeChanged {
		oldType = ch.OldType
	}
	// The old side goes away whole when the change removes or retypes it.
	if ch.Kind == Deleted || ch.Kind == TypeChanged {
		if oldType == Dir {
			dels, err := d.deletedTree(ch.Path)
			if err != nil {
				return nil, err
			}
			out = append(out, dels...)
		} else {
			mode := ch.Mode
			if ch.Kind == TypeChanged {
				mode = ch.OldMode
			}
			out = append(out, d.side(ch.Path, oldType, mode, true))
		}
	}
	if ch.Kind == Deleted || ch.Type == Dir {
		return out, nil
	}
	nw := d.side(ch.Path, ch.Type, ch.Mode, false)
	switch ch.Kind {
	case Added, TypeChanged:
		out = append(out, nw)
	case Modified, ModeChanged:
		old := d.side(ch.Path, ch.Type, ch.OldMode, true)
		if ch.Kind == ModeChanged && old.oldMode == nw.newMode {
			return out, nil // a mode git does not track
		}
		old.newPath, old.newMode, old.newSrc, old.newExec = nw.newPath, nw.newMode, nw.newSrc, nw.newExec
		out = append(out, old)
	}
	return out, nil
}

// side is a file section with only the old (or new) side of p.
func (d *differ) side(p string, t Type, perm fs.FileMode, old bool) fileDiff {
	mode := gitMode(t, perm)
	src := d.up(p)
	if old {
		src = d.low(p)
	}
	if t == Symlink {
		src, _ = os.Readlink(src)
	}
	exec := t == File && perm&0o111 != 0
	if old {
		return fileDiff{oldPath: p, oldMode: mode, oldSrc: src, oldExec: exec}
	}
	return fileDiff{newPath: p, newMode: mode, newSrc: src, newExec: exec}
}

// deletedTree is the deletion of every file below the workspace's dir p.
func (d *differ) deletedTree(p string) ([]fileDiff, error) {
	var out []fileDiff
	err := filepath.WalkDir(d.low(p), func(abs string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.lower, abs)
		if t := typeOf(fi); t == File || t == Symlink {
			out = append(out, d.side(filepath.ToSlash(rel), t, fi.Mode().Perm(), true))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	return out, nil
}

// renames pairs each deleted file with an added file of identical content
// and returns added path -> deleted path.
func (d *differ) renames(changes []Change) map[string]string {
	bySize := map[int64][]string{}
	for _, ch := range changes {
		if ch.Kind == Deleted && ch.Type == File && !ch.Collapsed {
			bySize[ch.Size] = append(bySize[ch.Size], ch.Path)
		}
	}
	pairs := map[string]string{}
	used := map[string]bool{}
	for _, ch := range changes {
		if ch.Kind != Added || ch.Type != File || ch.Collapsed || len(bySize[ch.Size]) == 0 {
			continue
		}
		h, err := blobHashFile(d.up(ch.Path))
		if err != nil {
			continue
		}
		for _, old := range bySize[ch.Size] {
			if oh, err := blobHashFile(d.low(old)); err == nil && !used[old] && oh == h {
				pairs[ch.Path], used[old] = old, true
				break
			}
		}
	}
	return pairs
}

// stat is a change's line counts, and how its files are shown.
type stat struct {
	ins, del int
	class    class // the highest of its files'
	controls bool  // a changed line is shown with escapes
	large    bool  // a file over maxReviewRead, not compared
}

func (d *differ) count(fds []fileDiff) (stat, error) {
	var s stat
	for i := range fds {
		a, wholeA, _, err := fds[i].read(true)
		if err != nil {
			return s, err
		}
		b, wholeB, _, err := fds[i].read(false)
		if err != nil {
			return s, err
		}
		c := fds[i].class(a, b)
		s.class = max(s.class, c)
		if !wholeA || !wholeB {
			s.large = true
			continue
		}
		if c == classBinary || c == classProgram {
			continue
		}
		old, nw := splitLines(a), splitLines(b)
		for _, e := range diffLines(old, nw) {
			switch e.op {
			case opInsert:
				s.ins++
				s.controls = s.controls || hasControl(nw[e.b:e.b+1])
			case opDelete:
				s.del++
				s.controls = s.controls || hasControl(old[e.a:e.a+1])
			}
		}
	}
	return s, nil
}

func head(b []byte) []byte { return b[:min(len(b), sniffLen)] }

// splitLines splits b after each newline; the last line may lack one.
func splitLines(b []byte) []string {
	var lines []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			lines = append(lines, string(b))
			break
		}
		lines = append(lines, string(b[:i+1]))
		b = b[i+1:]
	}
	return lines
}

func (d *differ) summary(w *bufio.Writer, changes []Change) error {
	pairs := d.renames(changes)
	renamed := map[string]bool{}
	for _, old := range pairs {
		renamed[old] = true
	}
	var files, ins, del int
	for _, ch := range changes {
		if renamed[ch.Path] && ch.Kind == Deleted {
			continue
		}
		letter := map[Kind]string{Added: "A", Modified: "M", Deleted: "D", ModeChanged: "M", TypeChanged: "T", Replaced: "M"}[ch.Kind]
		name := ch.Path
		if ch.Type == Dir && name != "." {
			name += "/"
		}
		name = QuoteName(name)
		var note string
		switch {
		case ch.Collapsed:
			note = fmt.Sprintf("(%d changes, not expanded)", ch.Count)
		case pairs[ch.Path] != "":
			letter, name = "R", QuoteName(pairs[ch.Path])+" -> "+name
		case ch.Kind == Deleted && ch.Type == Dir:
			note = fmt.Sprintf("(%d file%s)", ch.Count, map[bool]string{true: "s"}[ch.Count != 1])
		case ch.Kind == Replaced:
			note = "(replaced: the workspace's content below it is hidden)"
		case ch.Kind == TypeChanged:
			note = fmt.Sprintf("(%s -> %s)", ch.OldType, ch.Type)
		case ch.Kind == ModeChanged:
			note = fmt.Sprintf("(mode %s -> %s)", shortOctal(ch.OldMode), shortOctal(ch.Mode))
		case ch.Type == Special:
			note = "(special file, not applied)"
		case ch.Kind == Added && (ch.Type == File && ch.Mode != 0o644 && ch.Mode != 0o755 || ch.Type == Dir && ch.Mode != 0o755):
			note = "(mode " + shortOctal(ch.Mode) + ")"
		}
		if ch.Type == Symlink && ch.Kind != Deleted {
			note = strings.TrimSpace("-> " + QuoteName(ch.Target) + " " + note)
		}
		if ch.Kind == Modified && ch.Mode != ch.OldMode && ch.Type == File {
			note = fmt.Sprintf("(mode %s -> %s)", shortOctal(ch.OldMode), shortOctal(ch.Mode))
		}
		if n := Notice(ch); n != "" {
			note = strings.TrimSpace(note + " (" + n + ")")
		}
		var counts string
		if pairs[ch.Path] == "" && !ch.Collapsed {
			fds, err := d.fileDiffs(ch)
			if err != nil {
				return err
			}
			s, err := d.count(fds)
			if err != nil {
				return err
			}
			switch {
			case s.large && s.class == classProgram:
				counts = fmt.Sprintf("executable binary, too large to compare, %d -> %d bytes", ch.OldSize, ch.Size)
			case s.large:
				counts = fmt.Sprintf("too large to compare, %d -> %d bytes", ch.OldSize, ch.Size)
			case s.class == classProgram:
				counts = fmt.Sprintf("executable binary, %d -> %d bytes", ch.OldSize, ch.Size)
			case s.class == classBinary:
				counts = fmt.Sprintf("binary, %d -> %d bytes", ch.OldSize, ch.Size)
			case s.ins+s.del > 0:
				counts = strings.TrimSpace(plusMinus(s.ins, '+') + " " + plusMinus(s.del, '-'))
			}
			switch {
			case s.class == classScript:
				counts = strings.TrimSpace(counts + " (WARNING: not valid text, shown escaped)")
			case s.controls:
				counts = strings.TrimSpace(counts + " (WARNING: control characters)")
			}
			ins += s.ins
			del += s.del
		}
		if ch.Type != Dir || ch.Collapsed || ch.Kind == Deleted {
			files++
		}
		line := fmt.Sprintf("%s %s", letter, name)
		if note != "" {
			line += " " + note
		}
		if counts != "" {
			line = fmt.Sprintf("%-50s | %s", line, counts)
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "%s changed, %s(+), %s(-)\n", plural(files, "file"), plural(ins, "insertion"), plural(del, "deletion"))
	return nil
}

func plusMinus(n int, sign byte) string {
	if n == 0 {
		return ""
	}
	return string(sign) + strconv.Itoa(n)
}

func (d *differ) patch(w *bufio.Writer, changes []Change, forGit bool) error {
	pairs := d.renames(changes)
	renamed := map[string]bool{}
	for _, old := range pairs {
		renamed[old] = true
	}
	for _, ch := range changes {
		if renamed[ch.Path] && ch.Kind == Deleted {
			continue
		}
		if !forGit && (ch.Type == Dir || ch.Collapsed || ch.Type == Special) {
			if note := d.dirNote(ch); note != "" {
				fmt.Fprintln(w, note)
			}
		}
		// "executable" alone is already in the section's mode line.
		n := Notice(ch)
		if n == "executable" {
			n = ""
		}
		if m := modeNote(ch); m != "" {
			n = strings.TrimPrefix(n+", "+m, ", ")
		}
		if n != "" && !forGit {
			name := QuoteName(ch.Path)
			if ch.Type == Symlink {
				name += " -> " + QuoteName(ch.Target)
			}
			fmt.Fprintf(w, "# %s: %s\n", name, n)
		}
		if old := pairs[ch.Path]; old != "" {
			fd := fileDiff{oldPath: old, newPath: ch.Path, oldMode: gitMode(File, 0), newMode: gitMode(File, ch.Mode), rename: true}
			if fi, err := os.Lstat(d.low(old)); err == nil {
				fd.oldMode = gitMode(File, fi.Mode().Perm())
			}
			if err := d.writeFile(w, fd, forGit); err != nil {
				return err
			}
			continue
		}
		fds, err := d.fileDiffs(ch)
		if err != nil {
			return err
		}
		for _, fd := range fds {
			if err := d.writeFile(w, fd, forGit); err != nil {
				return err
			}
		}
	}
	return nil
}

// PatchNotes are, for a patch (which carries only what git applies),
// the notes the unified review gives that it cannot: warnings, and the
// modes git's mode lines do not show. One line per change that has any.
func PatchNotes(changes []Change) []string {
	var out []string
	for _, ch := range changes {
		var notes []string
		if n := Notice(ch); strings.Contains(n, "WARNING") {
			notes = append(notes, n)
		}
		if m := modeNote(ch); m != "" {
			notes = append(notes, m)
		} else if ch.Type == Dir && (ch.Kind == Added && ch.Mode != 0o755 || ch.Kind == ModeChanged) {
			notes = append(notes, "directory mode "+Octal(ch.Mode))
		}
		if len(notes) > 0 {
			out = append(out, QuoteName(ch.Path)+": "+strings.Join(notes, ", "))
		}
	}
	return out
}

// modeNote is, for a file, the mode git's mode lines cannot show: a new
// file's other than 0644 and 0755, a change between two modes git
// writes the same (0644 -> 0600).
func modeNote(ch Change) string {
	if ch.Type != File || ch.Collapsed || ch.Kind == Deleted {
		// A deletion's Mode is the old file's: no change of mode.
		return ""
	}
	switch {
	case ch.Kind == Added || ch.Kind == TypeChanged:
		if ch.Mode != 0o644 && ch.Mode != 0o755 {
			return "mode " + Octal(ch.Mode)
		}
	case ch.Mode != ch.OldMode && gitMode(File, ch.Mode) == gitMode(File, ch.OldMode):
		return "mode " + Octal(ch.OldMode) + " -> " + Octal(ch.Mode)
	}
	return ""
}

// dirNote describes a change that has no file section.
func (d *differ) dirNote(ch Change) string {
	name, dir := QuoteName(ch.Path), QuoteName(ch.Path+"/")
	switch {
	case ch.Deep:
		return fmt.Sprintf("# %s: its tree goes deeper than moat reads (paths over 4095 bytes): not listed, and apply refuses it; apply the other changes by name, or discard the change set", dir)
	case ch.Collapsed:
		return fmt.Sprintf("# %s: %d changes not shown", dir, ch.Count)
	case ch.Type == Special:
		return fmt.Sprintf("# %s: special file, not applied", name)
	case ch.Kind == Added && ch.Mode != 0o755:
		return fmt.Sprintf("# new directory %s (mode %s)", dir, Octal(ch.Mode))
	case ch.Kind == Added:
		return fmt.Sprintf("# new directory %s", dir)
	case ch.Kind == Replaced:
		return fmt.Sprintf("# replaced directory %s", dir)
	case ch.Kind == ModeChanged:
		return fmt.Sprintf("# directory %s: mode %s -> %s", dir, shortOctal(ch.OldMode), shortOctal(ch.Mode))
	case ch.Kind == TypeChanged:
		return fmt.Sprintf("# %s: %s -> directory", name, ch.OldType)
	}
	return ""
}

// class is how a file section is shown; a higher class wins over the
// other side's.
type class int

const (
	classText class = iota
	// classBinary: data that cannot run; named, not shown.
	classBinary
	// classScript: not valid text (a NUL, a byte outside UTF-8) but it can
	// run, or be read as text by a tool that runs what it names, so a
	// person must read it: shown as text, escaped, with a warning. A lone
	// odd byte must not turn a script or a config into "Binary files
	// differ".
	classScript
	// classProgram: an executable binary: named as one, with its size and
	// hash.
	classProgram
)

// class is the section's class, from the content of its old and new side.
func (fd *fileDiff) class(oldData, newData []byte) class {
	return max(classify(fd.oldPath, fd.oldExec, oldData), classify(fd.newPath, fd.newExec, newData))
}

func classify(name string, exec bool, data []byte) class {
	switch {
	case !isBinary(head(data), len(data) > sniffLen):
		return classText
	case bytes.HasPrefix(data, []byte("#!")) || scriptName(name):
		return classScript
	case exec && bytes.HasPrefix(data, []byte("\x7fELF")):
		// Linux loads ELF only: any other program's magic (PE's "MZ",
		// Mach-O's) makes the kernel refuse the file, and a shell then
		// runs it as a script (found by a tester).
		return classProgram
	case exec:
		// Not a program the kernel loads: a shell runs it as a script
		// (bash if its first line has no NUL, dash whatever it holds).
		return classScript
	case mostlyText(head(data)):
		// Text with an odd byte (a Latin-1 letter) or a stray NUL: tools
		// read such a package.json, pyproject.toml or workflow as text,
		// and run what it names, and bash runs a script with a NUL past
		// its first line (`bash ci/build`; one NUL hid a change as
		// "Binary files differ", found by a tester). Data that cannot be
		// text is full of NULs and stray bytes.
		return classScript
	}
	return classBinary
}

// mostlyText reports whether b reads as text but for a few odd bytes:
// one, or at most one in a hundred, is a NUL, a control character other
// than white space, or not UTF-8.
func mostlyText(b []byte) bool {
	odd := 0
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 || r < 0x20 && r != '\n' && r != '\r' && r != '\t' && r != '\f' || r == 0x7f {
			odd++
		}
		i += n
	}
	return odd <= 1 || odd*100 <= len(b)
}

// scriptExt and scriptBase name files that an interpreter or a build
// tool runs, with or without an execute bit or a "#!" line, and the
// configurations tools read what to run from (package.json's scripts, a
// workflow's steps): whatever odd bytes they hold (padding past the one in
// a hundred mostlyText takes hid a package.json as "Binary files differ",
// found by a tester), a person reads them as text.
var (
	scriptExt = map[string]bool{
		".sh": true, ".bash": true, ".zsh": true, ".ksh": true, ".fish": true, ".py": true, ".pyw": true,
		".pl": true, ".pm": true, ".rb": true, ".js": true, ".mjs": true, ".cjs": true, ".ts": true,
		".mts": true, ".cts": true, ".php": true, ".ps1": true, ".psm1": true, ".bat": true, ".cmd": true,
		".lua": true, ".tcl": true, ".awk": true, ".vbs": true, ".mk": true,
		".json": true, ".jsonc": true, ".json5": true, ".toml": true, ".yaml": true, ".yml": true,
		".cfg": true, ".ini": true, ".conf": true, ".xml": true, ".gradle": true, ".kts": true,
		".properties": true, ".cmake": true, ".bzl": true, ".nix": true,
	}
	scriptBase = map[string]bool{
		"Makefile": true, "makefile": true, "GNUmakefile": true, "Rakefile": true, "Justfile": true,
		"justfile": true, ".envrc": true, ".bashrc": true, ".profile": true, ".zshrc": true,
		"Dockerfile": true, "Containerfile": true, "Gemfile": true, "Vagrantfile": true, "Procfile": true,
		"CMakeLists.txt": true, "BUILD": true, "BUILD.bazel": true, "WORKSPACE": true, "meson.build": true,
		".npmrc": true, ".yarnrc": true, ".gitattributes": true, ".gitmodules": true,
	}
)

func scriptName(p string) bool {
	base := path.Base(p)
	return scriptBase[base] || scriptExt[strings.ToLower(path.Ext(base))]
}

// hasControl reports whether a line of text would print something a
// terminal acts on (see escapeLine).
func hasControl(lines []string) bool {
	for _, l := range lines {
		if _, escaped := escapeLine(l); escaped {
			return true
		}
	}
	return false
}

func (d *differ) writeFile(w *bufio.Writer, fd fileDiff, forGit bool) error {
	a, b := fd.oldPath, fd.newPath
	if a == "" {
		a = b
	}
	if b == "" {
		b = a
	}
	var oldData, newData []byte
	var old, nw []string
	cls := classText
	if !fd.rename {
		var err error
		var wholeOld, wholeNew bool
		var oldSize, newSize int64
		if oldData, wholeOld, oldSize, err = fd.read(true); err != nil {
			return err
		}
		if newData, wholeNew, newSize, err = fd.read(false); err != nil {
			return err
		}
		cls = fd.class(oldData, newData)
		if !wholeOld || !wholeNew {
			return writeLarge(w, fd, cls, a, b, oldSize, newSize, forGit, newData)
		}
		old, nw = splitLines(oldData), splitLines(newData)
	}
	// Git takes text only if it is valid, and a patch may reach a
	// terminal: text with controls in it goes as a binary literal.
	text := cls == classText || cls == classScript && !forGit
	if forGit && text && (hasControl(old) || hasControl(nw)) {
		text = false
	}
	var hs []hunk
	if text {
		hs = hunks(diffLines(old, nw), d.ctx)
	}
	if !forGit {
		writeWarnings(w, fd, cls, b, oldData, newData, old, nw, hs)
	}
	writeHeader(w, fd, a, b)
	if fd.rename {
		fmt.Fprintf(w, "similarity index 100%%\nrename from %s\nrename to %s\n", QuoteName(a), QuoteName(b))
		return nil
	}
	if fd.oldMode != 0 && fd.newMode != 0 && bytes.Equal(oldData, newData) {
		return nil // mode change only
	}
	index := fmt.Sprintf("index %s..%s", blobHash(oldData, fd.oldMode != 0), blobHash(newData, fd.newMode != 0))
	if fd.oldMode == fd.newMode {
		index += fmt.Sprintf(" %06o", fd.oldMode)
	}
	fmt.Fprintln(w, index)
	if len(oldData) == 0 && len(newData) == 0 {
		return nil
	}
	aName, bName := QuoteName("a/"+a), QuoteName("b/"+b)
	if fd.oldMode == 0 {
		aName = "/dev/null"
	}
	if fd.newMode == 0 {
		bName = "/dev/null"
	}
	if !text {
		if !forGit {
			fmt.Fprintf(w, "Binary files %s and %s differ\n", aName, bName)
			return nil
		}
		fmt.Fprintln(w, "GIT binary patch")
		if err := writeLiteral(w, newData); err != nil {
			return err
		}
		return writeLiteral(w, oldData)
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", aName, bName)
	for _, h := range hs {
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(h.aStart, h.aLen), hunkRange(h.bStart, h.bLen))
		for _, e := range h.edits {
			var line string
			if e.op == opInsert {
				line = nw[e.b]
			} else {
				line = old[e.a]
			}
			if !forGit {
				line, _ = escapeLine(line)
			}
			w.WriteByte(byte(e.op))
			w.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				w.WriteString("\n\\ No newline at end of file\n")
			}
		}
	}
	return nil
}

// writeWarnings writes the "#" lines that come before a file section of
// the unified diff: a file that runs although it is not valid text, an
// executable binary, or lines shown with escapes.
func writeWarnings(w *bufio.Writer, fd fileDiff, cls class, name string, oldData, newData []byte, old, nw []string, hs []hunk) {
	name = QuoteName(name)
	switch cls {
	case classScript:
		fmt.Fprintf(w, "# warning: %s is not valid text but can run or be read as text: its odd bytes are shown escaped\n", name)
		return
	case classProgram:
		data, was := newData, oldData
		if fd.newMode == 0 {
			data, was = oldData, nil
		}
		fmt.Fprintf(w, "# warning: %s is an executable binary: %d bytes, sha256 %x", name, len(data), sha256.Sum256(data))
		if fd.oldMode != 0 && fd.newMode != 0 {
			fmt.Fprintf(w, " (was %d bytes, sha256 %x)", len(was), sha256.Sum256(was))
		}
		w.WriteByte('\n')
		return
	}
	for _, h := range hs {
		for _, e := range h.edits {
			var line string
			if e.op == opInsert {
				line = nw[e.b]
			} else {
				line = old[e.a]
			}
			if _, escaped := escapeLine(line); escaped {
				fmt.Fprintf(w, "# warning: %s: control characters in the content are shown escaped (\\r, \\x1b, ...)\n", name)
				return
			}
		}
	}
}

// hunkRange is "start,len" with a 1-based start, or for an empty range
// the number of the line before it.
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// blobHash is git's object name of a blob with content b (SHA-1), or
// forty zeros for a side that does not exist.
func blobHash(b []byte, exists bool) string {
	if !exists {
		return strings.Repeat("0", 40)
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// blobHashFile is blobHash of the file p's content, read as it streams.
func blobHashFile(p string) (string, error) {
	f, err := openReview(p, false)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", fi.Size())
	if n, err := io.Copy(h, f); err != nil {
		return "", err
	} else if n != fi.Size() {
		return "", fmt.Errorf("%s changed as it was read", p)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeLarge shows a file section one of whose sides is over
// maxReviewRead by its sizes, not its content; a patch for git, which
// needs the content, is refused instead.
func writeLarge(w *bufio.Writer, fd fileDiff, cls class, a, b string, oldSize, newSize int64, forGit bool, head []byte) error {
	if forGit {
		return fmt.Errorf("%w: %s is over the %d MiB the review reads of a file, and a patch must carry it whole: apply the change set with moat apply instead", ErrTooLarge, QuoteName(b), maxReviewRead>>20)
	}
	switch cls {
	case classProgram:
		fmt.Fprintf(w, "# warning: %s is an executable binary\n", QuoteName(b))
	case classScript:
		fmt.Fprintf(w, "# warning: %s is not valid text but can run or be read as text\n", QuoteName(b))
	}
	writeHeader(w, fd, a, b)
	fmt.Fprintf(w, "File too large to compare (over %d MiB): %d -> %d bytes\n", maxReviewRead>>20, oldSize, newSize)
	if (cls == classText || cls == classScript) && fd.newMode != 0 && fd.newMode != gitSymlink && len(head) > 0 {
		// What a shell or an interpreter reads first is what runs
		// first: a reviewer sees at least that of a text too large to
		// compare.
		const maxLines, maxWidth = 40, 240
		lines := splitLines(head)
		fmt.Fprintf(w, "# its first %d bytes (at most %d lines of %d characters), the rest not shown:\n", len(head), maxLines, maxWidth)
		for i, line := range lines {
			if i == maxLines {
				break
			}
			line, _ = escapeLine(strings.TrimRight(line, "\n"))
			if len(line) > maxWidth {
				// Cut at a character's start: a stray byte of one could
				// read as a C1 control on some terminals.
				cut := maxWidth
				for cut > 0 && !utf8.RuneStart(line[cut]) {
					cut--
				}
				line = line[:cut] + "..."
			}
			w.WriteString("# | " + line + "\n")
		}
	}
	return nil
}

// writeLiteral writes one "literal" hunk of a git binary patch: the size,
// then the zlib-deflated data in lines of at most 52 bytes, each led by
// its length (A-Z for 1-26, a-z for 27-52) and encoded in git's base85.
func writeLiteral(w *bufio.Writer, data []byte) error {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		return err
	}
	fmt.Fprintf(w, "literal %d\n", len(data))
	buf := z.Bytes()
	for len(buf) > 0 {
		n := min(len(buf), 52)
		if n <= 26 {
			w.WriteByte(byte('A' + n - 1))
		} else {
			w.WriteByte(byte('a' + n - 27))
		}
		w.WriteString(base85(buf[:n]))
		w.WriteByte('\n')
		buf = buf[n:]
	}
	w.WriteByte('\n')
	return nil
}

const alphabet85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// base85 encodes b, zero-padded to a multiple of 4 bytes, as git does.
func base85(b []byte) string {
	var out []byte
	for i := 0; i < len(b); i += 4 {
		var acc uint32
		for j := 0; j < 4; j++ {
			acc <<= 8
			if i+j < len(b) {
				acc |= uint32(b[i+j])
			}
		}
		var chunk [5]byte
		for j := 4; j >= 0; j-- {
			chunk[j] = alphabet85[acc%85]
			acc /= 85
		}
		out = append(out, chunk[:]...)
	}
	return string(out)
}

type jsonChange struct {
	Change
	Mode       string `json:"mode"`
	OldMode    string `json:"old_mode,omitempty"`
	RenamedTo  string `json:"renamed_to,omitempty"`
	Insertions int    `json:"insertions"`
	Deletions  int    `json:"deletions"`
	// Notice: see Notice.
	Notice string `json:"notice,omitempty"`
	// The raw bytes of names and targets that are not UTF-8 (see JSON);
	// encoding/json writes a []byte in base64.
	PathBytes      []byte `json:"path_bytes,omitempty"`
	TargetBytes    []byte `json:"target_bytes,omitempty"`
	OldTargetBytes []byte `json:"old_target_bytes,omitempty"`
	RenamedToBytes []byte `json:"renamed_to_bytes,omitempty"`
}

// rawBytes is s as bytes when it is not UTF-8 (encoding/json would
// replace what is not), else nil.
func rawBytes(s string) []byte {
	if utf8.ValidString(s) {
		return nil
	}
	return []byte(s)
}

func (d *differ) json(w *bufio.Writer, changes []Change) error {
	pairs := d.renames(changes)
	to := map[string]string{}
	for nw, old := range pairs {
		to[old] = nw
	}
	out := struct {
		Workspace      string       `json:"workspace"`
		WorkspaceBytes []byte       `json:"workspace_bytes,omitempty"`
		Changes        []jsonChange `json:"changes"`
		FilesChanged   int          `json:"files_changed"`
		Insertions     int          `json:"insertions"`
		Deletions      int          `json:"deletions"`
	}{Workspace: d.lower, WorkspaceBytes: rawBytes(d.lower), Changes: []jsonChange{}}
	for _, ch := range changes {
		jc := jsonChange{Change: ch, Mode: Octal(ch.Mode), RenamedTo: to[ch.Path], Notice: Notice(ch),
			PathBytes: rawBytes(ch.Path), TargetBytes: rawBytes(ch.Target), OldTargetBytes: rawBytes(ch.OldTarget),
			RenamedToBytes: rawBytes(to[ch.Path])}
		if ch.OldMode != 0 {
			jc.OldMode = Octal(ch.OldMode)
		}
		fds, err := d.fileDiffs(ch)
		if err != nil {
			return err
		}
		s, err := d.count(fds)
		if err != nil {
			return err
		}
		jc.Insertions, jc.Deletions = s.ins, s.del
		out.Insertions += s.ins
		out.Deletions += s.del
		if ch.Type != Dir || ch.Collapsed || ch.Kind == Deleted {
			out.FilesChanged++
		}
		out.Changes = append(out.Changes, jc)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(JSONControls(b), '\n'))
	return err
}

// writeHeader writes a file section's "diff --git" line and its mode
// lines.
func writeHeader(w *bufio.Writer, fd fileDiff, a, b string) {
	fmt.Fprintf(w, "diff --git %s %s\n", QuoteName("a/"+a), QuoteName("b/"+b))
	switch {
	case fd.oldMode == 0:
		fmt.Fprintf(w, "new file mode %06o\n", fd.newMode)
	case fd.newMode == 0:
		fmt.Fprintf(w, "deleted file mode %06o\n", fd.oldMode)
	case fd.oldMode != fd.newMode:
		fmt.Fprintf(w, "old mode %06o\nnew mode %06o\n", fd.oldMode, fd.newMode)
	}
}

// plural is "1 file", "2 files", as git's summary line counts.
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}
