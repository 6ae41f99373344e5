package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// TypeCut: the last line of a stream, cut short, set aside ([Cut]).
const TypeCut = "cut"

// Cut is a TypeCut record: [OpenRecover] found the stream's last line cut
// short (a writer killed in the middle of it, power lost) or no record
// at all, moved its bytes to a file beside the stream, and went on with
// the chain from the last whole record.
type Cut struct {
	Type string    `json:"type"` // TypeCut
	Time time.Time `json:"time"`
	// Line is the line it was; Bytes its length, newline included if it
	// had one; SHA256 that of its bytes, which the file Saved (its name,
	// in the stream's directory) holds; Why what was wrong with it.
	Line   int    `json:"line"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	Saved  string `json:"saved"`
	Why    string `json:"why"`
}

// ErrBroken is returned (wrapped, with the *ChainError) by [OpenRecover]
// for a stream whose chain is broken before its last line.
var ErrBroken = errors.New("audit stream's chain is broken")

// OpenRecover is [Open] for a writer that may have been killed in the
// middle of a record (moat serve): it reads the whole stream first, and
// refuses it, naming the line (a *ChainError, and ErrBroken), if its
// chain is broken anywhere but in its last line, since an edit there is
// what the chain is there to show. A last line cut short, or no record
// at all, is set aside rather than refused: its bytes go to a new file
// beside the stream (NAME.cut-TIME, mode 0600), synced before the line
// is cut off the stream, and a [Cut] record saying so, which it returns,
// goes on with the chain from the last whole record. Nothing is lost,
// and nothing but that line is touched.
func OpenRecover(path string) (*Writer, *Cut, error) {
	w, dir, name, err := open(path)
	if err != nil {
		return nil, nil, err
	}
	defer dir.Close()
	cut, err := w.recoverLocked(path, dir, name)
	w.unlock()
	if err != nil {
		w.f.Close()
		return nil, nil, err
	}
	return w, cut, nil
}

func (w *Writer) recoverLocked(path string, dir dirHandle, name string) (*Cut, error) {
	fi, err := w.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audit stream %s: %w", path, err)
	}
	_, _, verr := Verify(io.NewSectionReader(w.f, 0, fi.Size()))
	var ce *ChainError
	switch {
	case verr == nil:
		if err := w.sync(); err != nil {
			return nil, fmt.Errorf("audit stream %s: %w", path, err)
		}
		return nil, nil
	case !errors.As(verr, &ce):
		return nil, fmt.Errorf("audit stream %s: %w", path, verr)
	case !ce.tail || ce.off+ce.n != fi.Size():
		return nil, fmt.Errorf("audit stream %s: %w: %w; moat extends only a chain that verifies (moat audit verify): keep this file and write to a new one", path, ErrBroken, ce)
	}
	bad := make([]byte, ce.n)
	if _, err := w.f.ReadAt(bad, ce.off); err != nil {
		return nil, fmt.Errorf("audit stream %s: read its last line: %w", path, err)
	}
	now := time.Now().UTC()
	saved := name + ".cut-" + now.Format("20060102T150405.000000000Z")
	if err := save(dir, saved, bad); err != nil {
		return nil, fmt.Errorf("audit stream %s: set its cut last line aside: %w", path, err)
	}
	if err := w.f.Truncate(ce.off); err != nil {
		return nil, fmt.Errorf("audit stream %s: cut its last line off: %w", path, err)
	}
	sum := sha256.Sum256(bad)
	cut := &Cut{Type: TypeCut, Time: now, Line: ce.Line, Bytes: ce.n, SHA256: hex.EncodeToString(sum[:]), Saved: saved, Why: ce.Msg}
	b, err := json.Marshal(cut)
	if err == nil {
		w.size = -1 // read the last line again
		err = w.appendLocked(b)
	}
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		return nil, fmt.Errorf("audit stream %s: %w", path, err)
	}
	return cut, nil
}

// save writes b to a new file name in dir, and syncs it and dir.
func save(dir dirHandle, name string, b []byte) error {
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	dir.sync() // the new name: best effort, as the stream's own
	return nil
}
