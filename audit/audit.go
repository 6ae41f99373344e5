// Package audit writes and verifies moat's audit stream: one JSON object
// per line, appended to a file and never rewritten, each line carrying
// the SHA-256 of the line before it, so that a record edited, deleted or
// inserted anywhere but at the end is detected ([Verify]).
//
// The chain: every record has a "prev" field, the lower-case hex SHA-256
// of the previous line exactly as written (its bytes, without the
// newline). The first record of a file has the SHA-256 of the empty
// string (e3b0c442…b855), so a file's first line is recognisable too.
// Opening an existing file continues its chain from its last line; a
// file whose last line is not a record of a chain (an older stream
// without "prev", a line cut short) is refused rather than extended,
// since a chain built on it would vouch for nothing; [OpenRecover] (moat
// serve, which a kill may stop in the middle of a record) verifies the
// whole file instead, refuses a chain broken before its last line, and
// sets a last line cut short aside in a file beside the stream, with a
// record (cut) saying so. What a chain cannot
// show is the loss of its last records: keep the last hash [Verify]
// returns somewhere else to detect that.
//
// The kinds of record (the "type" field of each), each a type of this
// package, so that every program writing a stream writes the same schema:
//
//	network   one decision of the egress proxy: [NetworkRecord]
//	denial    a system call the sandbox refused, or a program the rules
//	          refused to start (layer "rules"): [DenialRecord]
//	decision  the harness's decision about a command line before it runs,
//	          a program it starts (at "exec") or a proxy destination (at
//	          "network"), with what came of an ask: [Decision]
//	run       how one run ended: [RunRecord]
//	approval  a daemon's pending approval and who answered it: [Approval]
//	session   a daemon session began or ended, and why: [SessionEvent]
//	daemon    a daemon started (after one that did not stop cleanly, with
//	          the sessions it left) or stopped: [DaemonEvent]
//	dropped   how many of a stream's records (a daemon session's, a
//	          run's) were not written, the stream, or all of a daemon's
//	          sessions together, making more than its [Limiter] allows
//	          (never a decision of the rules): [Dropped]
//	cut       the stream's last line was found cut short and set aside
//	          ([OpenRecover]): [Cut]
//
// A daemon's stream holds the records of each session's event stream
// (network, denial, decision, run), each with the session and its tenant
// ([Tag]), and its own (session, daemon, dropped, approval). A daemon that
// restarts appends to the same stream, whose chain goes on across it.
//
// The records hold plain fields; package sandbox fills them from what a
// run reports, since this package imports none of moat's.
//
// No record holds a secret: commands and their arguments are recorded as
// given, environment values never.
//
// It uses the standard library only and makes no decision.
package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/moatbox/moat/internal/termsafe"
)

// The kinds of record moat writes. Every record is a JSON object with a
// "type" field naming its kind, so a stream can be filtered line by line.
const (
	// TypeNetwork: one decision of the egress proxy (an egress.Event).
	TypeNetwork = "network"
	// TypeDenial: a system call the sandbox refused, with the rule.
	TypeDenial = "denial"
	// TypeRun: how one run ended (after its network and denial records).
	TypeRun = "run"
	// TypeDecision: the harness's decision about a command line.
	TypeDecision = "decision"
)

// Decision is a TypeDecision record: what the harness decided about a
// command line before running it, a program it started or a destination
// of the egress proxy, and for an ask, what came of it. For At "network",
// Command is the method ("CONNECT" for a tunnel) and host:port/path.
type Decision struct {
	Type  string    `json:"type"` // TypeDecision
	Time  time.Time `json:"time"`
	RunID string    `json:"run_id"`
	// Command is the command line asked for; Dir its working directory.
	Command []string `json:"command"`
	Dir     string   `json:"dir,omitempty"`
	// Verdict is allow, deny or ask.
	Verdict string `json:"verdict"`
	// Rule names the rule that decided ("SET/NAME" or "NAME (FILE:LINE)");
	// "" when none did.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Decided is the simple command of the line that decided.
	Decided []string `json:"decided,omitempty"`
	// Outcome is what happened to an ask (or a deny): "approved" (Scope
	// says how far), "denied" (by the person), "timeout" (nobody answered
	// in time), "no approver" (refused: nobody to ask), or "learn" (let
	// through by moat run --learn).
	Outcome string `json:"outcome,omitempty"`
	// Approver says who answered an ask ("tty").
	Approver string `json:"approver,omitempty"`
	// At is "exec" for a program a process of the sandbox started,
	// checked at its execve; "network" for a destination of the egress
	// proxy; "write" for a change an API made to the workspace (Command
	// is then the change, write, mkdir or remove, and the path); "" for
	// the command line given to moat.
	At string `json:"at,omitempty"`
	// Scope is how far the approval of an approved ask reaches ("once",
	// "prefix", "session"; see harness.Scope), Expires when it ends
	// (absent: it does not expire).
	Scope   string     `json:"scope,omitempty"`
	Expires *time.Time `json:"expires,omitempty"`
	// Session and Tenant: as in [NetworkRecord].
	Session string `json:"session,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	// CommandSHA256 is, where [Writer.Write] cut Command (see
	// [BoundArgv]), the SHA-256 of the whole command line, its arguments
	// each ended by a NUL byte.
	CommandSHA256 string `json:"command_sha256,omitempty"`
}

// maxArg bounds one argument of a command line as a record keeps it, and
// maxArgv all of them: a program can be started with megabytes of
// arguments, each byte of which JSON may escape into six, and a record
// of its refusal must still be written (it was refused as too long, and
// so was the action's audit) and stay small.
const (
	maxArg  = 4 << 10
	maxArgv = 64 << 10
)

// BoundArgv returns argv as a record keeps it: an argument longer than
// its bound cut at a character's start and ended by "…[+N bytes]", and
// past the bound of all of them, one last "…[+N more arguments]". cut
// says whether anything was; then sum is the SHA-256 of the whole of
// argv, each argument ended by a NUL byte.
func BoundArgv(argv []string) (out []string, cut bool, sum string) {
	total := 0
	for _, a := range argv {
		total += len(a)
		if len(a) > maxArg || total > maxArgv {
			cut = true
			break
		}
	}
	if !cut {
		return argv, false, ""
	}
	h := sha256.New()
	for _, a := range argv {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	total = 0
	for i, a := range argv {
		if total >= maxArgv {
			out = append(out, fmt.Sprintf("…[+%d more arguments]", len(argv)-i))
			break
		}
		if n := min(maxArg, maxArgv-total); len(a) > n {
			for n > 0 && !utf8.RuneStart(a[n]) {
				n--
			}
			a = a[:n] + fmt.Sprintf("…[+%d bytes]", len(a)-n)
		}
		total += len(a)
		out = append(out, a)
	}
	return out, true, hex.EncodeToString(h.Sum(nil))
}

// bounded is d with its command lines bounded (BoundArgv).
func (d Decision) bounded() Decision {
	if c, cut, sum := BoundArgv(d.Command); cut {
		d.Command, d.CommandSHA256 = c, sum
	}
	if c, cut, _ := BoundArgv(d.Decided); cut {
		d.Decided = c
	}
	return d
}

// genesis is the "prev" of a file's first record: the SHA-256 of "".
var genesis = hash(nil)

func hash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// Writer appends records to one file. It is safe for concurrent use, and
// writers in several processes may share a file: each record is written
// under an exclusive lock of the file (flock), after reading the last line
// again if someone else appended since, so the chain stays one chain.
type Writer struct {
	mu   sync.Mutex
	f    *os.File
	prev string // the SHA-256 of the last line
	size int64  // the file's size after the last line this Writer knows
	err  error
}

// ErrNotAFile is returned by [Open] for a path that is a symbolic link
// (or has one on it: [OpenFile]) or not a regular file.
var ErrNotAFile = errors.New("not a regular file")

// Open opens path for appending, creating it (mode 0600: the stream names
// the hosts a run reached) if needed. An existing file's chain is
// continued from its last line; a file whose last line is not a record
// of a chain is refused.
//
// A symbolic link on the path is refused rather than followed ([OpenFile]
// says which it follows), and so is anything but a regular file (a fifo
// would hold the writer once full): a stream kept where a sandboxed
// command can write (the workspace) may have been replaced by a link, or
// a directory on its path, and following it would append records, whose
// text a command partly chooses, to any file moat's user can write,
// creating it if need be (a shell's start-up file runs them).
func Open(path string) (*Writer, error) {
	w, dir, _, err := open(path)
	if err != nil {
		return nil, err
	}
	dir.Close()
	err = w.sync()
	w.unlock()
	if err != nil {
		w.f.Close()
		return nil, fmt.Errorf("audit stream %s: %w", path, err)
	}
	return w, nil
}

// open opens and locks path's stream; it returns its directory too, and
// its name there.
func open(path string) (*Writer, dirHandle, string, error) {
	f, dir, name, err := openFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, "", fmt.Errorf("open audit stream: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		dir.Close()
		if err == nil {
			err = fmt.Errorf("%s is a %v, not a file: %w", path, fi.Mode().Type(), ErrNotAFile)
		}
		return nil, nil, "", fmt.Errorf("open audit stream: %w", err)
	}
	w := &Writer{f: f}
	if err := w.lock(); err != nil {
		f.Close()
		dir.Close()
		return nil, nil, "", err
	}
	return w, dir, name, nil
}

func (w *Writer) lock() error {
	if err := syscall.Flock(int(w.f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock audit stream: %w", err)
	}
	return nil
}

func (w *Writer) unlock() { syscall.Flock(int(w.f.Fd()), syscall.LOCK_UN) }

// sync reads the file's last line again if the file changed size since
// this Writer last knew it.
func (w *Writer) sync() error {
	fi, err := w.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == w.size && w.prev != "" {
		return nil
	}
	if fi.Size() == 0 {
		w.prev, w.size = genesis, 0
		return nil
	}
	last, err := lastLine(w.f, fi.Size())
	if err != nil {
		return fmt.Errorf("%w; moat extends only a chain it can continue: write to a new file", err)
	}
	if _, err := prevOf(last); err != nil {
		return fmt.Errorf("its last line is not a record of a hash chain (%v); moat extends only a chain it can continue: write to a new file", err)
	}
	w.prev, w.size = hash(last), fi.Size()
	return nil
}

// lastLine returns the last line of a file of the given size, which must
// end with a newline.
func lastLine(f *os.File, size int64) ([]byte, error) {
	const chunk = 64 << 10
	var tail []byte
	for off := size; off > 0; {
		n := min(int64(chunk), off)
		off -= n
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
			return nil, err
		}
		tail = append(buf, tail...)
		if len(tail) > 0 && tail[len(tail)-1] != '\n' {
			return nil, errors.New("the file does not end with a newline: its last record was cut short")
		}
		if i := bytes.LastIndexByte(tail[:len(tail)-1], '\n'); i >= 0 {
			return tail[i+1 : len(tail)-1], nil
		}
	}
	return tail[:len(tail)-1], nil
}

// prevOf returns the "prev" field of a record.
func prevOf(line []byte) (string, error) {
	var rec struct {
		Prev *string `json:"prev"`
		Type string  `json:"type"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return "", fmt.Errorf("not a JSON object: %v", err)
	}
	if rec.Prev == nil {
		return "", errors.New(`no "prev" field`)
	}
	return *rec.Prev, nil
}

// MaxRecord bounds the length of one line of a stream, newline aside:
// [Verify] refuses a longer line rather than reading without end (a device,
// a file that is not a stream), and [Writer.Write] refuses to write one,
// so that every stream it writes verifies. It leaves room for a command
// line as long as the kernel lets a program be started with, every byte
// of it escaped in JSON.
const MaxRecord = 64 << 20

// Write appends v, which must encode as a JSON object, as one line, with
// its "prev" field first. A [Decision]'s and a [RunRecord]'s command lines
// are bounded first ([BoundArgv]). The first error is kept and returned by every
// later Write and by Close.
func (w *Writer) Write(v any) error {
	switch r := v.(type) {
	case Decision:
		v = r.bounded()
	case *Decision:
		if r != nil {
			v = r.bounded()
		}
	case RunRecord:
		v = r.bounded()
	case *RunRecord:
		if r != nil {
			v = r.bounded()
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("audit record: %w", err)
	}
	// A person reads the stream on a terminal (tail -f): the C1
	// controls a command line or a name may hold go escaped.
	b = termsafe.JSONControls(b)
	if len(b) < 2 || b[0] != '{' {
		return fmt.Errorf("audit record: %T does not encode as a JSON object", v)
	}
	if len(b)+len(`{"prev":"`+genesis+`",`) > MaxRecord {
		// Refused without keeping the error: the stream is still whole,
		// and the records after this one can be written.
		return fmt.Errorf("audit record: %d bytes, more than the %d of a record", len(b), MaxRecord)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.err = w.lock(); w.err != nil {
		return w.err
	}
	defer w.unlock()
	return w.appendLocked(b)
}

// appendLocked appends b, a record encoded, with w.mu and the file's lock
// held.
func (w *Writer) appendLocked(b []byte) error {
	if err := w.sync(); err != nil {
		w.err = fmt.Errorf("audit stream: %w", err)
		return w.err
	}
	line := make([]byte, 0, len(b)+80)
	line = append(line, `{"prev":"`+w.prev+`"`...)
	if len(b) > 2 {
		line = append(line, ',')
	}
	line = append(line, b[1:]...)
	if _, err := w.f.Write(append(line, '\n')); err != nil {
		// A record cut short (the disk full in its middle) would end
		// the chain for every later writer: the file goes back to its
		// last whole record, which verifies and can be continued.
		if terr := w.f.Truncate(w.size); terr != nil {
			err = fmt.Errorf("%w; the record cut short stays at its end: %v", err, terr)
		}
		w.err = fmt.Errorf("write audit stream: %w", err)
		return w.err
	}
	w.prev = hash(line)
	w.size += int64(len(line)) + 1
	return nil
}

// Err is the error that stopped the stream (its first failed write),
// or nil: the records after it are not written.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close flushes the stream to disk and closes it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.f.Sync(); err != nil && w.err == nil {
		w.err = fmt.Errorf("sync audit stream: %w", err)
	}
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}

// ChainError is the first record of a stream that breaks its chain.
type ChainError struct {
	Line int // 1-based
	Msg  string
	// tail: the line is cut short, or not a record at all, as a record
	// a writer was killed in the middle of may be; off and n are where it
	// starts and its length, newline included.
	tail bool
	off  int64
	n    int64
}

func (e *ChainError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Verify reads a whole stream and checks its chain. It returns the number
// of records and the SHA-256 of the last line (to keep elsewhere: a chain
// cannot show that records were cut from its end), or a *ChainError naming
// the first bad record, with the number of records before it known to be
// intact (those before the line it names as maybe edited). A line longer than [MaxRecord] is a *ChainError
// too, found without reading past it.
func Verify(r io.Reader) (records int, last string, err error) {
	br := bufio.NewReader(r)
	prev := genesis
	var off int64
	for n := 1; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, errLong) {
			return n - 1, "", &ChainError{Line: n, Msg: fmt.Sprintf("longer than %d bytes without a newline: not a record of an audit stream", MaxRecord)}
		}
		if err == io.EOF && len(line) == 0 {
			return n - 1, prev, nil
		}
		if err != nil && err != io.EOF {
			return n - 1, "", err
		}
		size := int64(len(line))
		if line[len(line)-1] != '\n' {
			return n - 1, "", &ChainError{Line: n, Msg: "cut short: the file ends in the middle of this record", tail: true, off: off, n: size}
		}
		line = line[:len(line)-1]
		got, perr := prevOf(line)
		switch {
		case perr != nil:
			return n - 1, "", &ChainError{Line: n, Msg: perr.Error(), tail: true, off: off, n: size}
		case got != prev && n == 1:
			return n - 1, "", &ChainError{Line: n, Msg: "the first record does not start a chain: records before it were removed"}
		case got != prev:
			// Line n-1 may be the one edited: the records known intact
			// are those before it.
			return n - 2, "", &ChainError{Line: n, Msg: fmt.Sprintf("its prev is not the SHA-256 of line %d: line %d was edited, or records were removed or inserted before this one", n-1, n-1)}
		}
		prev = hash(line)
		off += size
	}
}

var errLong = errors.New("line too long")

// readLine is bufio.Reader.ReadBytes('\n') that gives up with errLong
// once a line, newline included, is longer than MaxRecord+1 bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > MaxRecord+1 {
			return nil, errLong
		}
		line = append(line, frag...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}
