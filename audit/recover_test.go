package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenRecoverSetsACutTailAside: a stream whose last record was cut
// short (no newline), or whose last line is no record (zeros, as power
// loss may leave), opens with OpenRecover: the whole records are kept as
// they were, the cut bytes are in the file the Cut record names, the Cut
// record continues the chain, and the stream verifies and takes more
// records. The control: Open still refuses the same file.
func TestOpenRecoverSetsACutTailAside(t *testing.T) {
	for name, tail := range map[string]string{
		"cut short":  `{"prev":"0123","type":"decision","verdict":"de`,
		"zeros":      "\x00\x00\x00\x00",
		"not a line": "garbage\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := writeChain(t, 4)
			whole, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(p, append(append([]byte{}, whole...), tail...), 0o600)
			if w, err := Open(p); err == nil {
				w.Close()
				t.Fatal("the control: Open took a cut stream")
			}
			w, cut, err := OpenRecover(p)
			if err != nil {
				t.Fatalf("OpenRecover: %v", err)
			}
			if cut == nil || cut.Line != 5 || cut.Bytes != int64(len(tail)) {
				t.Errorf("cut = %+v, want line 5, %d bytes", cut, len(tail))
			}
			if err := w.Write(Decision{Type: TypeDecision, Verdict: "deny"}); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			if !bytes.HasPrefix(got, whole) {
				t.Errorf("the whole records were changed:\n%s", got)
			}
			if n, _, err := verifyFile(t, p); n != 6 || err != nil {
				t.Errorf("verify: %d records, %v; want 6 (4, cut, deny)", n, err)
			}
			lines := strings.Split(strings.TrimSuffix(string(got[len(whole):]), "\n"), "\n")
			var rec Cut
			if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || rec.Type != TypeCut {
				t.Fatalf("the record after the whole ones: %s (%v)", lines[0], err)
			}
			saved, err := os.ReadFile(filepath.Join(filepath.Dir(p), rec.Saved))
			if err != nil || string(saved) != tail {
				t.Errorf("the cut bytes, in %s: %q, %v; want %q", rec.Saved, saved, err, tail)
			}
			// Opening it again changes nothing.
			w, cut, err = OpenRecover(p)
			if err != nil || cut != nil {
				t.Fatalf("again: %+v, %v", cut, err)
			}
			w.Close()
		})
	}
}

// TestOpenRecoverRefusesAnEdit: a record edited in the middle of the
// stream (a whole line, not a cut tail) makes OpenRecover refuse it,
// naming the file and the line after it, and the file is left as it
// was; a line in the middle that is no record is refused too. The control
// is the same stream unedited, which opens.
func TestOpenRecoverRefusesAnEdit(t *testing.T) {
	p := writeChain(t, 6)
	w, cut, err := OpenRecover(p)
	if err != nil || cut != nil {
		t.Fatalf("the control: %+v, %v", cut, err)
	}
	w.Close()
	orig, _ := os.ReadFile(p)
	for name, edit := range map[string]func([]byte) []byte{
		"a verdict changed": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"run_id":"2","command":["git","push"],"verdict":"ask"`), []byte(`"run_id":"2","command":["git","push"],"verdict":"allow"`), 1)
		},
		"a line no record": func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte("\n"))
			lines[2] = []byte("garbage\n")
			return bytes.Join(lines, nil)
		},
	} {
		edited := edit(orig)
		if bytes.Equal(edited, orig) {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		os.WriteFile(p, edited, 0o600)
		w, _, err := OpenRecover(p)
		var ce *ChainError
		if err == nil {
			w.Close()
		}
		if !errors.Is(err, ErrBroken) || !errors.As(err, &ce) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: OpenRecover = %v, want ErrBroken naming %s", name, err, p)
		} else if ce.Line != 3 && ce.Line != 4 {
			t.Errorf("%s: line %d", name, ce.Line)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, edited) {
			t.Errorf("%s: the file was changed", name)
		}
	}
}

// TestOpenRecoverAFirstRecordCut: a stream whose only line, its first
// record, was cut short is set aside whole, and the cut record starts the
// chain; the control is that Open refuses it.
func TestOpenRecoverAFirstRecordCut(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	os.WriteFile(p, []byte(`{"prev":"`+genesis+`","type":"da`), 0o600)
	if w, err := Open(p); err == nil {
		w.Close()
		t.Fatal("the control: Open took a cut stream")
	}
	w, cut, err := OpenRecover(p)
	if err != nil || cut == nil || cut.Line != 1 {
		t.Fatalf("OpenRecover: %+v, %v", cut, err)
	}
	w.Close()
	if n, _, err := verifyFile(t, p); n != 1 || err != nil {
		t.Errorf("verify: %d records, %v; want the cut record", n, err)
	}
}
