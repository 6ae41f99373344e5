package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// The file tools. A direct or read-only session's files are the
// workspace's, through the session's files API (every path resolved
// beneath the pinned workspace root by the kernel). An overlay or copy
// session's files are its change set's, which only its sandbox sees: the
// tools read and write them with small commands inside the sandbox, which
// resolve the path there and refuse one that leads out of the workspace.

// errEscape is the text of a path that leaves the workspace.
const errEscape = "path escapes the workspace"

// rel turns a tool's path into one relative to the workspace root: an
// absolute path inside the workspace is accepted as the same file.
func (s *server) rel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	if path.IsAbs(p) {
		ws := s.session().Workspace
		switch {
		case p == ws:
			return ".", nil
		case strings.HasPrefix(p, ws+"/"):
			p = p[len(ws)+1:]
		default:
			return "", fmt.Errorf("%s: %q is outside the workspace %s; give a path relative to it", errEscape, p, ws)
		}
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", fmt.Errorf("%s: %q contains \"..\"; give a path relative to the workspace root", errEscape, p)
		}
	}
	c := path.Clean("/" + p)[1:]
	if c == "" {
		c = "."
	}
	return c, nil
}

// viaSandbox says whether the session's files are only seen inside its
// sandbox.
func (s *server) viaSandbox() bool {
	m := s.session().WorkspaceMode
	return m == policy.WorkspaceOverlay || m == policy.WorkspaceCopy
}

// fileError turns an error of the files API into the model's sentence.
func fileError(err error) string {
	switch {
	case errors.Is(err, daemon.ErrWorkspace) && strings.Contains(err.Error(), "leads out"):
		return errEscape + ": " + err.Error()
	case errors.Is(err, daemon.ErrNoFile):
		return err.Error() + " (list_files shows what exists)"
	case errors.Is(err, daemon.ErrProtected):
		// The daemon's error already says why the path is protected.
		msg := err.Error()
		if !strings.HasSuffix(msg, "host tools run or read it") {
			msg += ": host tools run or read it"
		}
		return msg + ", so the sandbox may not write it; ask the user to change it"
	}
	return err.Error()
}

// tooBig is the text of a file, or of an edit's result, over the files
// API's bound (daemon.MaxFileSize), which the file tools keep in every
// mode: an overlay session's files do not pass through that API, and the
// server holds a whole file in memory to read or edit it.
func tooBig(what string, size int64) string {
	return fmt.Sprintf("%s %d bytes, %s", what, size, overLimit)
}

var overLimit = fmt.Sprintf("over the file tools' limit of %d bytes; nothing was read or changed: work on it with run_command (head, sed, split)", daemon.MaxFileSize)

// capped keeps the first max bytes written to it and counts the rest,
// so that a helper's output (a huge or endless file) cannot grow the
// server's memory past the bound, whatever the policy's output limit.
type capped struct {
	buf bytes.Buffer
	max int
	n   int64
}

func (c *capped) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// inSandbox runs a helper command in the session's sandbox: the file
// tools of an overlay session, about rel. A helper's refusals come back
// on stderr; its output beyond daemon.MaxFileSize is an error, and so is
// a helper a limit ended or cut (its output past limits.output dropped:
// a file read so would come back cut short, and be written back so by an
// edit), whatever its exit code.
func (s *server) inSandbox(ctx context.Context, rel string, stdin []byte, argv ...string) (stdout []byte, err error) {
	out, errb := &capped{max: daemon.MaxFileSize + 1}, &capped{max: 64 << 10}
	stdio := backend.Stdio{Stdout: out, Stderr: errb}
	if stdin != nil {
		stdio.Stdin = bytes.NewReader(stdin)
	}
	// The rules see the helper as any command; an ask about it is
	// answered no: the helper is not what the model asked for.
	rep, err := s.session().Exec(ctx, &daemon.ExecRequest{Args: argv, Approver: s.fallback()}, stdio)
	if err != nil {
		return nil, errors.New(refusal(rep, err))
	}
	if out.n > daemon.MaxFileSize {
		return nil, errors.New(tooBig(rel+" is at least", out.n))
	}
	if slices.Contains(rep.LimitsHit, "output") || rep.Reason == "output" {
		return nil, fmt.Errorf("%s is larger than this session's output limit (limits.output), which bounds what the file tools read through a command in the sandbox: read it in parts with run_command (head, tail, sed -n)", rel)
	}
	if rep.ExitCode != 0 || rep.Reason != "exit" {
		msg := strings.TrimSpace(errb.buf.String())
		switch {
		case msg == "":
			msg = fmt.Sprintf("exit code %d (%s)", rep.ExitCode, rep.Reason)
		case rep.Reason != "exit" || len(rep.LimitsHit) > 0:
			// Which limit stopped it, beside what the helper said.
			msg += fmt.Sprintf(" (%s; limits reached: %s)", rep.Reason, strings.Join(rep.LimitsHit, ", "))
		}
		return nil, errors.New(msg)
	}
	return out.buf.Bytes(), nil
}

// The helpers' scripts: $1 is the path, $2 the workspace inside the
// sandbox. The path's real location must lie in the workspace.
const (
	shCheck = `inside() { case "$1" in "$2"|"$2"/*) return 0;; esac; return 1; }
[ -e "$1" ] || [ -L "$1" ] || { echo "no such file: $1 (list_files shows what exists)" >&2; exit 2; }
r=$(realpath -e -- "$1") || exit 2
inside "$r" "$2" || { echo "` + errEscape + `: $1 leads to $r" >&2; exit 3; }
`
	shWrite = `d=$(dirname -- "$1")
mkdir -p -- "$d" || exit 2
r=$(realpath -e -- "$d") || exit 2
case "$r" in "$2"|"$2"/*) ;; *) echo "` + errEscape + `: $1 leads to $r" >&2; exit 3;; esac
if [ -L "$1" ]; then t=$(realpath -m -- "$1"); case "$t" in "$2"/*) ;; *) echo "` + errEscape + `: $1 is a link to $t" >&2; exit 3;; esac; fi
if [ -L "$1" ] && [ ! -e "$1" ]; then echo "$1 is a link to a file that does not exist; write the file it names by its own path" >&2; exit 2; fi
[ -z "$3" ] || [ "$(realpath -m -- "$1")" = "$2/$1" ] || { echo "$1 leads through a link to $(realpath -m -- "$1"), and the policy's write rules decide a path as written: write it by its own path" >&2; exit 3; }
if [ -e "$1" ] && [ ! -f "$1" ]; then echo "$1 is not a regular file: inspect it with run_command" >&2; exit 2; fi
f=$(realpath -m -- "$1") || exit 2
t=$(mktemp -- "$(dirname -- "$f")/.moat-write.XXXXXX") || exit 2
if [ -e "$f" ]; then chmod "$(stat -c %a -- "$f")" -- "$t"; else chmod "$(printf %o $((0666 & ~$(umask))))" -- "$t"; fi
cat > "$t" || { s=$?; rm -f -- "$t"; case $s in 153) w="the session's file-size limit, limits.file_size, stopped it";; *) w="status $s";; esac; echo "$1 is unchanged: the write failed ($w)" >&2; exit "$s"; }
mv -f -- "$t" "$f" || { rm -f -- "$t"; exit 2; }`
	// shList lists: $3 is find's depth, $4 how many entries to keep.
	// sh has no pipefail, and find's failure (a directory it may not
	// read, an entry gone while it walked) would leave a listing cut
	// short that reads as whole: its messages and its status come back
	// on fd 3, and either fails the helper, except the SIGPIPE of head
	// taking the entries it keeps. find runs in the directory, so that
	// its messages name paths relative to it.
	shList = shCheck + `[ -d "$r" ] || { echo "$1 is not a directory: read_file reads a file" >&2; exit 2; }
cd -- "$r" 2>/dev/null || { echo "cannot enter the directory $1: permission denied" >&2; exit 2; }
{ o=$( { { find . -mindepth 1 $3 -printf '%y %s %P\0' 2>&3 3>&- 4>&-; echo "=$?" >&3; } | head -z -n "$4" >&4 3>&- 4>&-; } 3>&1 ); } 4>&1
s=${o##*=}; o=${o%=*}
[ -z "$o" ] && { [ "$s" = 0 ] || [ "$s" = 141 ]; } && exit 0
printf '` + errList + `\n%s\n' "$1" "${o:-find ended with status $s}" >&2
exit 5`
)

// errList begins the error of a listing that find could not finish.
const errList = "could not list all of %s, so nothing is listed (list the directories it could read one by one, or inspect it with run_command):"

// shRead reads a file: $3 is the file tools' size limit. A FIFO would
// hold the read until the wall-clock limit, and a huge file is refused
// before it is read.
var shRead = shCheck + `[ -f "$r" ] || { echo "$1 is not a regular file: inspect it with run_command" >&2; exit 2; }
s=$(stat -c %s -- "$r") || exit 2
[ "$s" -le "$3" ] || { echo "$1 is $s bytes, ` + overLimit + `" >&2; exit 4; }
exec cat -- "$r"`

func (s *server) getFile(ctx context.Context, rel string) ([]byte, error) {
	if !s.viaSandbox() {
		b, err := s.session().ReadFile(rel)
		if err != nil {
			return nil, errors.New(fileError(err))
		}
		return b, nil
	}
	return s.inSandbox(ctx, rel, nil, "/bin/sh", "-c", shRead, "sh", rel, s.session().Workspace, strconv.Itoa(daemon.MaxFileSize))
}

func (s *server) putFile(ctx context.Context, rel string, data []byte) error {
	if len(data) > daemon.MaxFileSize {
		return errors.New(tooBig(rel+" would be", int64(len(data))))
	}
	// The policy's write rules decide the change (package daemon); an
	// ask goes to the approver ctx carries (gateWrite).
	if !s.viaSandbox() {
		// The files API replaces the entry rel names; a tool writes what
		// it names, as the overlay's helper (shWrite) and an editor do:
		// a link's target inside the workspace, never a link leading out
		// or nowhere, never a special file.
		if fi, err := s.session().Stat(rel); err == nil {
			switch fi.Type {
			case "symlink":
				real, err := s.session().Resolve(rel)
				switch {
				case errors.Is(err, daemon.ErrNoFile):
					return fmt.Errorf("%s is a link to a file that does not exist; write the file it names by its own path", rel)
				case err != nil:
					return errors.New(fileError(err)) // a link leading out: errEscape
				}
				// The write rules decide the path written, the target,
				// which must be a file too.
				if tfi, err := s.session().Stat(real); err == nil && tfi.Type != "file" {
					return fmt.Errorf("%s leads to %s, which is not a regular file: inspect it with run_command", rel, real)
				}
				rel = real
			case "file", "dir":
			default:
				return fmt.Errorf("%s is not a regular file: inspect it with run_command", rel)
			}
		}
		// The directories on the way, each made beneath the root (and
		// decided by the rules) unless it is there.
		if d := path.Dir(rel); d != "." {
			parts := strings.Split(d, "/")
			for i := range parts {
				dir := strings.Join(parts[:i+1], "/")
				if fi, err := s.session().Stat(dir); err == nil && fi.Type == "dir" {
					continue
				}
				if err := s.session().Mkdir(ctx, dir); err != nil {
					return errors.New(fileError(err))
				}
			}
		}
		if err := s.session().WriteFile(ctx, rel, data, 0o644); err != nil {
			return errors.New(fileError(err))
		}
		return nil
	}
	if err := s.session().CheckWrite(ctx, sandbox.WriteFile, rel); err != nil {
		return errors.New(fileError(err))
	}
	if data == nil {
		data = []byte{}
	}
	// Under write rules the helper must not follow a link of the
	// workspace, which would carry the write past them.
	strict := ""
	if s.session().HasWriteRules() {
		strict = "strict"
	}
	_, err := s.inSandbox(ctx, rel, data, "/bin/sh", "-c", shWrite, "sh", rel, s.session().Workspace, strict)
	return err
}

// maxLine bounds the bytes of one line read_file returns (and half the
// server's output bound, where that is less).
const maxLine = 4000

func (s *server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
	rel, err := s.rel(in.Path)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	if in.Offset < 0 || in.Limit < 0 {
		return errorResult("offset and limit must not be negative: offset is the first line (1-based), limit how many lines"), nil, nil
	}
	b, err := s.getFile(ctx, rel)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return errorResult(fmt.Sprintf("%s is not a text file (%d bytes); inspect it with run_command (file, xxd, head -c)", rel, len(b))), nil, nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	first := max(in.Offset, 1)
	if first > len(lines) && len(lines) > 0 {
		return errorResult(fmt.Sprintf("offset %d is past the end of %s (%d lines)", in.Offset, rel, len(lines))), nil, nil
	}
	last := len(lines)
	if in.Limit > 0 {
		last = min(last, first-1+in.Limit)
	}
	var out strings.Builder
	for i := first; i <= last; i++ {
		if out.Len() > s.opts.MaxOutput {
			fmt.Fprintf(&out, "[... lines %d to %d of %d left out: read them with offset %d ...]\n", i, len(lines), len(lines), i)
			break
		}
		line := strings.TrimSuffix(lines[i-1], "\n")
		if lim := min(maxLine, s.opts.MaxOutput/2); len(line) > lim {
			// Minified code and data are one line: the bound holds per line
			// too, or one line would fill the model's context.
			cut := lim
			for cut > 0 && !utf8.RuneStart(line[cut]) {
				cut--
			}
			line = fmt.Sprintf("%s[... %d more bytes of line %d left out: read it with run_command (cut -c, fold) ...]", line[:cut], len(line)-cut, i)
		}
		fmt.Fprintf(&out, "%6d\t%s\n", i, line)
	}
	if len(lines) == 0 {
		out.WriteString("(empty file)\n")
	}
	return textResult(out.String()), nil, nil
}

func (s *server) writeFile(ctx context.Context, req *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
	rel, err := s.rel(in.Path)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	if rel == "." {
		return errorResult("path names the workspace root, not a file"), nil, nil
	}
	ctx, res := s.gateWrite(ctx, req, rel)
	if res != nil {
		return res, nil, nil
	}
	if err := s.putFile(ctx, rel, []byte(in.Content)); err != nil {
		return errorResult(err.Error()), nil, nil
	}
	return textResult(fmt.Sprintf("wrote %s (%d bytes)", rel, len(in.Content))), nil, nil
}

func (s *server) editFile(ctx context.Context, req *mcp.CallToolRequest, in editIn) (*mcp.CallToolResult, any, error) {
	rel, err := s.rel(in.Path)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	ctx, res := s.gateWrite(ctx, req, rel)
	if res != nil {
		return res, nil, nil
	}
	if in.OldString == "" {
		return errorResult("old_string is empty: give the exact text to replace (use write_file to create a file)"), nil, nil
	}
	if in.OldString == in.NewString {
		return errorResult("old_string and new_string are the same: nothing would change"), nil, nil
	}
	b, err := s.getFile(ctx, rel)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	// What read_file refuses to show, edit_file refuses to change: an
	// edit of a file the agent cannot have read is a guess, and a
	// replacement in binary data breaks it silently.
	if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return errorResult(fmt.Sprintf("%s is not a text file (%d bytes); nothing changed. Change it with run_command", rel, len(b))), nil, nil
	}
	text := string(b)
	n := strings.Count(text, in.OldString)
	switch {
	case n == 0:
		return errorResult(fmt.Sprintf("old_string was not found in %s; nothing changed. read_file it and copy the text exactly, whitespace and indentation included", rel)), nil, nil
	case n > 1 && !in.ReplaceAll:
		return errorResult(fmt.Sprintf("old_string occurs %d times in %s; nothing changed. Include more surrounding lines to make it unique, or set replace_all", n, rel)), nil, nil
	}
	// The result's size is known before it is made: a short string
	// replaced everywhere by a long one would otherwise ask for more
	// memory than the machine has, which ends the server.
	if size := int64(len(text)) + int64(n)*(int64(len(in.NewString))-int64(len(in.OldString))); len(in.NewString) > daemon.MaxFileSize || size > daemon.MaxFileSize {
		return errorResult(tooBig("the edit would make "+rel, size)), nil, nil
	}
	if in.ReplaceAll {
		text = strings.ReplaceAll(text, in.OldString, in.NewString)
	} else {
		text = strings.Replace(text, in.OldString, in.NewString, 1)
	}
	if err := s.putFile(ctx, rel, []byte(text)); err != nil {
		return errorResult(err.Error()), nil, nil
	}
	return textResult(fmt.Sprintf("edited %s: replaced %d occurrence(s)", rel, n)), nil, nil
}

// maxList bounds the entries list_files returns.
const maxList = 2000

func (s *server) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in listIn) (*mcp.CallToolResult, any, error) {
	rel, err := s.rel(in.Path)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	var lines []string
	truncated := false
	if s.viaSandbox() {
		depth := "-maxdepth 1"
		if in.Recursive {
			depth = ""
		}
		out, err := s.inSandbox(ctx, rel, nil, "/bin/sh", "-c", shList, "sh", rel, s.session().Workspace, depth, strconv.Itoa(maxList+1))
		if err != nil {
			t, _ := truncate([]byte(err.Error()), s.opts.MaxOutput)
			return errorResult(t), nil, nil
		}
		// NUL ends each entry: a name may hold a newline.
		for _, l := range strings.Split(string(out), "\x00") {
			t, rest, _ := strings.Cut(l, " ")
			size, name, _ := strings.Cut(rest, " ")
			if l == "" {
				continue
			}
			lines = append(lines, entry(typeName(t), size, joinRel(rel, name)))
		}
	} else {
		dirs := []string{rel}
		for len(dirs) > 0 && !truncated {
			d := dirs[0]
			dirs = dirs[1:]
			ents, trunc, err := s.session().List(d)
			if err != nil {
				return errorResult(fileError(err)), nil, nil
			}
			truncated = truncated || trunc
			for _, e := range ents {
				lines = append(lines, entry(e.Type, strconv.FormatInt(e.Size, 10), e.Path))
				if in.Recursive && e.Type == "dir" {
					dirs = append(dirs, e.Path)
				}
			}
			truncated = truncated || len(lines) > maxList
		}
	}
	if len(lines) > maxList {
		lines, truncated = lines[:maxList], true
	}
	out := strings.Join(lines, "\n")
	if len(lines) == 0 {
		out = "(empty directory)"
	}
	if truncated {
		out += "\n[... more entries left out: list a subdirectory, or use search_files ...]"
	}
	return textResult(out), nil, nil
}

// entry is one line of list_files. A name with a character that could
// make the listing read as something else (a newline, which would end
// the line and begin a made-up entry, an escape sequence, a
// bidirectional control) is shown as a Go string, escaped.
func entry(typ, size, p string) string {
	if !utf8.ValidString(p) || strings.IndexFunc(p, unprintable) >= 0 {
		p = strconv.Quote(p)
	}
	if typ == "dir" {
		return "dir      " + p + "/"
	}
	return fmt.Sprintf("%-8s %s (%s bytes)", typ, p, size)
}

func typeName(findType string) string {
	switch findType {
	case "f":
		return "file"
	case "d":
		return "dir"
	case "l":
		return "symlink"
	}
	return "other"
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// shSearch runs grep inside the sandbox on the path $1, which must lie in
// the workspace $2 however links lead (grep follows a link named on its
// command line); the rest of the arguments are grep's. Its own refusals
// exit 10 and up, apart from grep's statuses.
const shSearch = `[ -e "$1" ] || { echo "no such file: $1 (list_files shows what exists)" >&2; exit 10; }
r=$(realpath -e -- "$1") || exit 10
case "$r" in "$2"|"$2"/*) ;; *) echo "` + errEscape + `: $1 leads to $r" >&2; exit 11;; esac
p=$1; shift 2
exec grep "$@" -- "$p"`

// searchFiles greps inside the sandbox, which sees the session's files
// whatever the mode: grep -r does not follow symbolic links below the
// path it is given, and that path is held to the workspace (shSearch).
// Files grep cannot read do not hide the matches in those it can.
func (s *server) searchFiles(ctx context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
	rel, err := s.rel(in.Path)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	if in.Pattern == "" {
		return errorResult("pattern is empty"), nil, nil
	}
	per := in.MaxMatchPerFile
	if per <= 0 {
		per = 50
	}
	argv := []string{"/bin/sh", "-c", shSearch, "sh", rel, s.session().Workspace, "-rnIE", "--color=never", "-m", strconv.Itoa(per)}
	if in.IgnoreCase {
		argv = append(argv, "-i")
	}
	if in.FilesOnly {
		argv = append(argv, "-l")
	}
	if in.Glob != "" {
		argv = append(argv, "--include="+in.Glob)
	}
	argv = append(argv, "-e", in.Pattern)
	// Its start and end only, as run_command's: a match on a line of
	// hundreds of megabytes would be held whole in the daemon's memory,
	// outside any limit of the session's (found by a tester).
	out := newCapture(s.opts.MaxOutput)
	errb := &capped{max: 64 << 10}
	rep, err := s.session().Exec(ctx, &daemon.ExecRequest{Args: argv, Approver: s.fallback()}, backend.Stdio{Stdout: out, Stderr: errb})
	if err != nil {
		return errorResult(refusal(rep, err)), nil, nil
	}
	msg := strings.TrimSpace(errb.buf.String())
	switch {
	case rep.ExitCode == 0:
		return textResult(out.show(s.opts.MaxOutput)), nil, nil
	case rep.ExitCode == 1:
		return textResult("no matches"), nil, nil
	case rep.ExitCode == 2 && unreadOnly(msg):
		// grep says 2 when it could not read a file, matches or not.
		note := "\n\n(" + unreadNote(msg) + ")"
		if out.Len() == 0 {
			return textResult("no matches in the files grep could read" + note), nil, nil
		}
		return textResult(out.show(s.opts.MaxOutput) + note), nil, nil
	}
	if msg == "" {
		msg = fmt.Sprintf("grep ended with exit code %d (%s)", rep.ExitCode, rep.Reason)
	}
	if rep.ExitCode >= 10 {
		return errorResult(msg), nil, nil
	}
	return errorResult("search failed: " + msg), nil, nil
}

// unreadOnly says whether grep's messages are all about files or
// directories it could not read, not about the search (a bad pattern).
func unreadOnly(msg string) bool {
	if msg == "" {
		return false
	}
	for _, l := range strings.Split(msg, "\n") {
		if !strings.HasPrefix(l, "grep: ") || !(strings.HasSuffix(l, ": Permission denied") || strings.HasSuffix(l, ": No such file or directory")) {
			return false
		}
	}
	return true
}

// unreadNote names the first few paths grep could not read.
func unreadNote(msg string) string {
	lines := strings.Split(msg, "\n")
	var paths []string
	for _, l := range lines[:min(len(lines), 5)] {
		l = strings.TrimPrefix(l, "grep: ")
		l = strings.TrimSuffix(strings.TrimSuffix(l, ": Permission denied"), ": No such file or directory")
		paths = append(paths, strings.TrimPrefix(l, "./"))
	}
	more := ""
	if len(lines) > len(paths) {
		more = fmt.Sprintf(" and %d more", len(lines)-len(paths))
	}
	return fmt.Sprintf("not searched, grep could not read them: %s%s", strings.Join(paths, ", "), more)
}

// changeSet opens the overlay session's change set; nil, nil when its
// commands have not made one yet.
func (s *server) changeSet() (*workspace.ChangeSet, error) {
	if !s.viaSandbox() {
		return nil, fmt.Errorf("this session's workspace mode is %s: its writes are real at once, so there is no diff to review or apply (an overlay session, moat mcp --workspace-mode overlay, keeps them apart)", s.session().WorkspaceMode)
	}
	id := s.session().ChangeSet()
	if id == "" {
		return nil, nil
	}
	cs, err := workspace.Open(id)
	if errors.Is(err, workspace.ErrNotFound) {
		return nil, nil
	}
	return cs, err
}

func (s *server) diff(_ context.Context, _ *mcp.CallToolRequest, in diffIn) (*mcp.CallToolResult, any, error) {
	cs, err := s.changeSet()
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	if cs == nil {
		return textResult("no changes yet"), nil, nil
	}
	changes, err := cs.Changes()
	if err != nil {
		return errorResult("reading the changes: " + err.Error()), nil, nil
	}
	if len(changes) == 0 {
		return textResult("no changes yet"), nil, nil
	}
	f := workspace.Unified
	if in.Summary {
		f = workspace.Summary
	}
	// Its start and end only: the whole diff of large files would be
	// held in the daemon's memory first (found by a tester).
	b := newCapture(s.opts.MaxOutput)
	if err := cs.WriteDiff(b, changes, workspace.DiffOptions{Format: f}); err != nil {
		return errorResult("writing the diff: " + err.Error()), nil, nil
	}
	return textResult(b.show(s.opts.MaxOutput)), nil, nil
}

// previewRefusal says why the change set id refuses the apply Preview
// looked at, for the model: nothing changed, and the session goes on.
func previewRefusal(id string, rep workspace.Report, err error) string {
	const goesOn = " Nothing was applied and the session goes on with its changes."
	var nc *workspace.NoChangeError
	switch {
	case errors.Is(err, workspace.ErrProtected):
		list := rep.Protected
		return fmt.Sprintf("apply refused: %d change(s) touch files that tools run or read on the host (%s); only the user can apply those, after review (moat diff %s, moat apply %s).%s", len(list), strings.Join(list, ", "), id, id, goesOn)
	case errors.Is(err, workspace.ErrConflict):
		var list []string
		for _, c := range rep.Conflicts {
			list = append(list, c.Path)
		}
		return fmt.Sprintf("apply refused: %d path(s) changed on the host since the session began (%s); ask the user how to merge them.%s", len(list), strings.Join(list, ", "), goesOn)
	case errors.As(err, &nc):
		return err.Error() + "." + goesOn
	}
	return "apply refused: " + err.Error() + "." + goesOn
}

func (s *server) apply(ctx context.Context, req *mcp.CallToolRequest, in applyIn) (*mcp.CallToolResult, any, error) {
	cs, err := s.changeSet()
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	if cs == nil {
		return textResult("no changes to apply"), nil, nil
	}
	var paths []string
	for _, p := range in.Paths {
		rel, err := s.rel(p)
		if err != nil {
			return errorResult(err.Error()), nil, nil
		}
		paths = append(paths, rel)
	}
	changes, err := cs.Changes()
	if err != nil {
		return errorResult("reading the changes: " + err.Error()), nil, nil
	}
	if len(changes) == 0 {
		return textResult("no changes to apply"), nil, nil
	}
	// A server that cannot end the session's sandbox (the daemon's /mcp)
	// cannot apply: said before anyone is asked, not after a person
	// approved what could not happen (found by a tester).
	if s.opts.Restart == nil {
		return errorResult(fmt.Sprintf("apply needs this session's sandbox to end first, and this server cannot restart it; nothing was applied. Ask the user to run moat apply %s once the session has ended", cs.ID())), nil, nil
	}
	// An apply the change set would refuse (a protected path, a file
	// changed on the host, a path that selects nothing) is refused here,
	// before a person is asked and before the restart, which would leave
	// the session on a fresh layer with these changes set aside.
	if prep, err := cs.Preview(paths, nil); err != nil {
		return errorResult(previewRefusal(cs.ID(), prep, err)), nil, nil
	}
	// What the person approves is the change set as it is now: the
	// session's commands, and the model's own tool calls, go on while the
	// question waits, and what they write after it must not ride along
	// (found by a tester). The summary shown is made between two equal
	// digests of the diff of what the apply writes (ChangeSet.Select: a
	// set that changes there meanwhile is refused, a change elsewhere is
	// not), and the apply compares the digest again once the sandbox has
	// ended.
	shown, err := diffPrint(cs, paths)
	if err != nil {
		return errorResult("reading the changes: " + err.Error()), nil, nil
	}
	if changes, err = cs.Changes(); err != nil {
		return errorResult("reading the changes: " + err.Error()), nil, nil
	}
	if changes, err = cs.Select(changes, paths); err != nil {
		return errorResult("reading the changes: " + err.Error()), nil, nil
	}
	var sum bytes.Buffer
	cs.WriteDiff(&sum, changes, workspace.DiffOptions{Format: workspace.Summary})
	if again, err := diffPrint(cs, paths); err != nil || again != shown {
		return errorResult("the changes are changing (a command of the session still writes them): stop it, then call apply again; nothing was applied"), nil, nil
	}
	what := "every change"
	if len(paths) > 0 {
		what = strings.Join(paths, ", ")
	}
	// The digest is part of what is asked about: an answer given to the
	// question about another diff (the client calls again with it, and
	// the changes are read anew) is not this apply's.
	a := harness.Action{Argv: append([]string{"moat", "apply", "--reviewed", shown[:16], cs.ID()}, paths...), Dir: s.session().Workspace}
	d := harness.Decision{Verdict: harness.Ask, Reason: "apply writes " + what + " of the session's changes into the real workspace:\n" + sum.String()}
	ap, ask := s.gate(req, a, d)
	if ask != nil {
		return ask, nil, nil
	}
	if ap == nil {
		return errorResult(fmt.Sprintf("apply needs a person's approval and this client offers no way to ask one (elicitation); nothing was applied. Ask the user to review and apply it: moat diff %s, then moat apply %s", cs.ID(), cs.ID())), nil, nil
	}
	ok, err := ap.Approve(ctx, a, d)
	if err != nil || !ok {
		why := "the user did not approve it"
		if err != nil {
			why = err.Error()
		}
		return errorResult(fmt.Sprintf("not applied: %s. Nothing reached the workspace; ask the user what to change.", why)), nil, nil
	}
	// The sandbox holds the change set while it is mounted: the session
	// ends for the apply and starts again over the applied workspace
	// (Restart, checked above).
	if st := s.session().Status(); st.Running > 0 {
		return errorResult(fmt.Sprintf("%d command(s) still run in this session; apply restarts the sandbox, which would kill them. Stop them (stop_process) and call apply again", st.Running)), nil, nil
	}
	var rep workspace.Report
	ns, err := s.opts.Restart(ctx, func() error {
		now, err := diffPrint(cs, paths)
		if err != nil {
			return fmt.Errorf("reading the changes: %w", err)
		} else if now != shown {
			return errors.New("the changes are not those the user approved: the session changed them while the question waited; review them again (diff) and call apply again")
		}
		rep, err = cs.Apply(paths, nil)
		return err
	})
	if ns != nil {
		s.mu.Lock()
		s.sess, s.cursors = ns, map[string]int64{}
		s.mu.Unlock()
	}
	// The session has restarted whatever the apply did: on a refusal its
	// changes are no longer under the new session's layer, but kept.
	kept := fmt.Sprintf(" The session was restarted over the real workspace, without these changes: they are kept as change set %s, which the user can review and apply on the host (moat diff %s, moat apply %s).", cs.ID(), cs.ID(), cs.ID())
	if err != nil {
		return errorResult("apply failed, nothing was applied: " + err.Error() + "." + kept), nil, nil
	}
	if len(rep.Conflicts) > 0 || len(rep.Protected) > 0 {
		return errorResult("nothing was applied: " + jsonText(rep) + kept), nil, nil
	}
	rest := ""
	if len(paths) == 0 {
		// Every change is in the workspace now: the set holds nothing to
		// review, as after moat apply.
		cs.Discard()
	} else if all, err := cs.Changes(); err == nil {
		// The new sandbox starts over the real workspace: the changes
		// left out are not in it, but kept, and said where.
		applied := map[string]bool{}
		for _, c := range rep.Applied {
			applied[c.Path] = true
		}
		left := 0
		for _, c := range all {
			if !applied[c.Path] {
				left++
			}
		}
		if left > 0 {
			rest = fmt.Sprintf("; the %d change(s) not applied are no longer in the session: they are kept as change set %s, which the user can review and apply on the host (moat diff %s, moat apply %s)", left, cs.ID(), cs.ID(), cs.ID())
		}
	}
	return textResult(fmt.Sprintf("applied %d change(s) to %s (approved by the user); the sandbox was restarted over the result, so background processes and /tmp start afresh%s\n%s", len(rep.Applied), s.session().Workspace, rest, jsonText(rep))), nil, nil
}

// diffPrint is a digest of the diff of what an apply of paths would
// write (every change when paths is empty).
func diffPrint(cs *workspace.ChangeSet, paths []string) (string, error) {
	changes, err := cs.Changes()
	if err != nil {
		return "", err
	}
	if changes, err = cs.Select(changes, paths); err != nil {
		return "", err
	}
	h := sha256.New()
	// Every change listed, none folded into a directory's count.
	if err := cs.WriteDiff(h, changes, workspace.DiffOptions{Format: workspace.Unified, Filter: workspace.Filter{Collapse: []string{}}}); err != nil {
		return "", err
	}
	// The diff shows a file over the review's read bound by its sizes
	// alone: an edit of the same size would leave it unchanged. Each
	// changed file's stamp in the layer tells it (the layer is moat's
	// state directory; a link on the way, the command's, is not followed
	// at its end, and a stamp of what it leads to only changes the digest).
	for _, c := range changes {
		if c.Type != workspace.File || c.Kind == workspace.Deleted {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(cs.UpperDir(), filepath.FromSlash(c.Path))); err == nil {
			sec, nsec, size := changeStamp(fi)
			fmt.Fprintf(h, "\x00%s\x00%d.%d\x00%d", c.Path, sec, nsec, size)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
