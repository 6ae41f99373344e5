package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unicode/utf8"
)

func TestAppendsWholeLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	w0, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	w0.Write(map[string]any{"earlier": true})
	w0.Close()
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w.Write(map[string]any{"n": i, "pad": string(make([]byte, 5000))})
		}(i)
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(p)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("line %d is not one JSON object: %.80q", lines+1, sc.Text())
		}
		lines++
	}
	if lines != 51 {
		t.Errorf("%d lines, want the earlier one and 50 new", lines)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
}

// writeChain writes n records to a new stream in two Opens, so the second
// continues the chain of the first.
func writeChain(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	for _, part := range [][2]int{{0, n / 2}, {n / 2, n}} {
		w, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := part[0]; i < part[1]; i++ {
			if err := w.Write(Decision{Type: TypeDecision, RunID: fmt.Sprint(i), Command: []string{"git", "push"}, Verdict: "ask"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func verifyFile(t *testing.T, p string) (int, string, error) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Verify(f)
}

func TestChainIntact(t *testing.T) {
	p := writeChain(t, 6)
	n, last, err := verifyFile(t, p)
	if err != nil || n != 6 || len(last) != 64 {
		t.Fatalf("Verify = %d, %q, %v; want 6 records", n, last, err)
	}
	b, _ := os.ReadFile(p)
	if first, _, _ := strings.Cut(string(b), "\n"); !strings.HasPrefix(first, `{"prev":"`+genesis+`","type":"decision"`) {
		t.Errorf("first record = %s", first)
	}
}

func TestChainTampered(t *testing.T) {
	edit := func(lines []string) []string {
		lines[2] = strings.Replace(lines[2], `"ask"`, `"allow"`, 1)
		return lines
	}
	del := func(lines []string) []string { return append(lines[:3:3], lines[4:]...) }
	insert := func(lines []string) []string {
		return append(lines[:1:1], append([]string{lines[1]}, lines[1:]...)...)
	}
	dropFirst := func(lines []string) []string { return lines[1:] }
	tests := []struct {
		name   string
		change func([]string) []string
		cut    int // bytes to cut from the end instead
		line   int
		msg    string
	}{
		{"edited", edit, 0, 4, "line 3 was edited"},
		{"deleted", del, 0, 4, "line 3 was edited, or records were removed"},
		{"inserted", insert, 0, 3, "line 2 was edited"},
		{"first removed", dropFirst, 0, 1, "does not start a chain"},
		{"cut mid-record", nil, 30, 6, "cut short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeChain(t, 6)
			b, _ := os.ReadFile(p)
			if tt.change != nil {
				lines := strings.SplitAfter(string(b), "\n")
				lines = tt.change(lines[:len(lines)-1])
				b = []byte(strings.Join(lines, ""))
			} else {
				b = b[:len(b)-tt.cut]
			}
			os.WriteFile(p, b, 0o600)
			_, _, err := verifyFile(t, p)
			var ce *ChainError
			if !errors.As(err, &ce) || ce.Line != tt.line || !strings.Contains(ce.Msg, tt.msg) {
				t.Errorf("Verify = %v, want line %d: %s", err, tt.line, tt.msg)
			}
		})
	}
}

func TestOpenRefusesBrokenTail(t *testing.T) {
	for name, content := range map[string]string{
		"no chain":  `{"type":"run"}` + "\n",
		"cut short": `{"prev":"` + genesis + `","type":"run"`,
		"not json":  "hello\n",
	} {
		p := filepath.Join(t.TempDir(), "audit.jsonl")
		os.WriteFile(p, []byte(content), 0o600)
		if w, err := Open(p); err == nil || !strings.Contains(err.Error(), "write to a new file") {
			t.Errorf("%s: Open = %v, want a refusal", name, err)
			if w != nil {
				w.Close()
			}
		}
	}
}

// endless is a stream with no end and no newline, as /dev/zero is.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.read += int64(len(p))
	return len(p), nil
}

// TestVerifyBoundsALine: a stream whose line never ends is refused once
// the line is longer than a record can be, after records before it
// verified; the same stream cut into lines of a record's length verifies.
func TestVerifyBoundsALine(t *testing.T) {
	p := writeChain(t, 2)
	head, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	e := &endless{}
	n, _, err := Verify(io.MultiReader(bytes.NewReader(head), e))
	var ce *ChainError
	if !errors.As(err, &ce) || ce.Line != 3 || n != 2 || !strings.Contains(ce.Msg, "without a newline") {
		t.Fatalf("Verify of an endless line = %d, %v; want a ChainError at line 3 after 2 records", n, err)
	}
	if e.read > MaxRecord+1<<20 {
		t.Errorf("read %d bytes of the endless line, want about %d", e.read, MaxRecord)
	}
	// Control: the records alone verify.
	if n, _, err := Verify(bytes.NewReader(head)); err != nil || n != 2 {
		t.Fatalf("Verify of the records alone = %d, %v", n, err)
	}
}

// TestWriteRefusesWhatVerifyRefuses: a record too long for Verify is not
// written, and the stream stays whole: the next record is written and
// the stream verifies.
func TestWriteRefusesWhatVerifyRefuses(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	// Not a Decision, whose command lines Write bounds.
	long := map[string]any{"type": "other", "pad": strings.Repeat("\x00", MaxRecord/6+1)}
	if err := w.Write(long); err == nil {
		t.Error("a record longer than MaxRecord was written")
	}
	if err := w.Write(Decision{Type: TypeDecision, Command: []string{"true"}}); err != nil {
		t.Fatalf("the record after it: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := verifyFile(t, p); err != nil || n != 1 {
		t.Fatalf("Verify = %d, %v; want 1 record", n, err)
	}
}

// A link where the stream goes, which a sandboxed command can plant when
// the stream lies in its workspace, is refused rather than followed: it
// would have had the records appended to (or a new file made at) any path
// moat's user can write. A fifo is refused too. The control: a regular
// file at the same place opens and takes a record.
func TestOpenRefusesLinksAndOddFiles(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	for name, target := range map[string]string{"new file": victim, "existing empty file": filepath.Join(dir, "empty")} {
		os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644)
		link := filepath.Join(dir, "link-"+name)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		w, err := Open(link)
		if !errors.Is(err, ErrNotAFile) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("a link to a %s: %v", name, err)
		}
		if err == nil {
			w.Write(map[string]any{"x": 1})
			w.Close()
		}
		if b, _ := os.ReadFile(target); len(b) != 0 {
			t.Errorf("written through a link to a %s: %q", name, b)
		}
	}
	if _, err := os.Stat(victim); err == nil {
		t.Error("a file was made at the link's target")
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if w, err := Open(fifo); !errors.Is(err, ErrNotAFile) {
		t.Errorf("a fifo: %v", err)
		if err == nil {
			w.Close()
		}
	}
	p := filepath.Join(dir, "audit.jsonl")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := verifyFile(t, p); n != 1 || err != nil {
		t.Errorf("the control: %d records, %v", n, err)
	}
}

// A command line that is not valid UTF-8 is recorded exactly, in
// "command_raw": "command" alone, where encoding/json writes U+FFFD for
// each bad byte, read the same for rm \xff, rm \xfe and rm U+FFFD. The
// control: a valid command line has no "command_raw", and its "command"
// is exact.
func TestCommandNotUTF8RecordedExactly(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := [][]string{{"rm", "\xff"}, {"rm", "\xfe"}, {"rm", "\ufffd"}, {"rm", "-r", "a\nb\x1b[2J\"}"}}
	for i, c := range lines {
		if i%2 == 0 {
			err = w.Write(Decision{Type: TypeDecision, Command: c, Verdict: "deny"})
		} else {
			err = w.Write(&RunRecord{Type: TypeRun, Command: c, Reason: "exit"})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if n, _, err := verifyFile(t, p); n != len(lines) || err != nil {
		t.Fatalf("verify: %d records, %v", n, err)
	}
	b, _ := os.ReadFile(p)
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var rec struct {
			Command    []string  `json:"command"`
			CommandRaw *[][]byte `json:"command_raw"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		valid := i >= 2
		switch {
		case valid && rec.CommandRaw != nil:
			t.Errorf("line %d, valid UTF-8, has command_raw: %s", i+1, line)
		case valid && !slices.Equal(rec.Command, lines[i]):
			t.Errorf("line %d: command %q, want %q", i+1, rec.Command, lines[i])
		case !valid && rec.CommandRaw == nil:
			t.Errorf("line %d: %q recorded as %q alone", i+1, lines[i], rec.Command)
		case !valid:
			var got []string
			for _, a := range *rec.CommandRaw {
				got = append(got, string(a))
			}
			if !slices.Equal(got, lines[i]) {
				t.Errorf("line %d: command_raw %q, want %q", i+1, got, lines[i])
			}
		}
	}
}

// TestTag: each kind of a session's record gets its session and tenant,
// written as fields of the record; another record comes back as it was.
func TestTag(t *testing.T) {
	for _, rec := range []any{
		Decision{Type: TypeDecision}, NetworkRecord{Type: TypeNetwork},
		DenialRecord{Type: TypeDenial}, RunRecord{Type: TypeRun},
	} {
		tagged, kind := Tag(rec, "s1", "uid:7")
		b, err := json.Marshal(tagged)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Type, Session, Tenant string }
		json.Unmarshal(b, &got)
		if kind != got.Type || got.Session != "s1" || got.Tenant != "uid:7" {
			t.Errorf("%T tagged: kind %q, %s", rec, kind, b)
		}
		// Elsewhere (moat run's stream) the fields are absent.
		if b, _ := json.Marshal(rec); strings.Contains(string(b), `"session"`) || strings.Contains(string(b), `"tenant"`) {
			t.Errorf("%T untagged: %s", rec, b)
		}
	}
	other := Approval{Type: TypeApproval, Session: "s2"}
	if got, kind := Tag(other, "s1", "uid:7"); kind != "" || got.(Approval).Session != "s2" {
		t.Errorf("an approval tagged: %+v %q", got, kind)
	}
}

// TestHugeCommandLineRecorded: the decision of a command line of
// megabytes, each byte of which JSON escapes into six, is written (it was
// refused as more than a record, and the refused exec left no record:
// found by a tester), bounded, with the whole line's hash, and the stream
// verifies; positive control: a short command line is kept as it is.
func TestHugeCommandLineRecorded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	huge := []string{"curl"}
	for range 46 {
		huge = append(huge, strings.Repeat("<", 131000))
	}
	huge = append(huge, "é"+strings.Repeat("x", maxArg))
	if err := w.Write(Decision{Type: TypeDecision, Command: huge, Decided: huge, Verdict: "deny", At: "exec"}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := w.Write(&Decision{Type: TypeDecision, Command: []string{"curl", "x"}, Verdict: "deny", At: "exec"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(RunRecord{Type: TypeRun, Command: huge, Error: "denied: " + strings.Join(huge, " ")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b, _ := os.ReadFile(p)
	if n, _, err := Verify(bytes.NewReader(b)); n != 3 || err != nil {
		t.Fatalf("verify: %d records, %v", n, err)
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	var d Decision
	if err := json.Unmarshal(lines[0], &d); err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, a := range d.Command {
		size += len(a)
	}
	if len(lines[0]) > 1<<20 || size > maxArgv+100 || d.Command[0] != "curl" || len(d.CommandSHA256) != 64 ||
		!strings.HasSuffix(d.Command[1], "…[+126904 bytes]") || !strings.HasPrefix(d.Command[len(d.Command)-1], "…[+") {
		t.Errorf("record of %d bytes, command of %d bytes in %d arguments (%q…), sum %q", len(lines[0]), size, len(d.Command), d.Command[len(d.Command)-1], d.CommandSHA256)
	}
	var run RunRecord
	if err := json.Unmarshal(lines[2], &run); err != nil || len(run.Error) > maxArg+64 || len(lines[2]) > 1<<20 {
		t.Errorf("run record of %d bytes, error of %d: %v", len(lines[2]), len(run.Error), err)
	}
	var small Decision
	json.Unmarshal(lines[1], &small)
	if !slices.Equal(small.Command, []string{"curl", "x"}) || small.CommandSHA256 != "" {
		t.Errorf("control: %+v", small)
	}
	if c, cut, _ := BoundArgv([]string{"é" + strings.Repeat("x", maxArg)}); !cut || !utf8.ValidString(c[0]) {
		t.Errorf("a cut argument %q is not UTF-8", c[0][:8])
	}
}
