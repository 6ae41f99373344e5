package egress

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// writeSizes records the size of each write.
type writeSizes struct {
	bytes.Buffer
	sizes []int
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.Buffer.Write(p)
}

// TestCopyGrowing: what copyGrowing copies is exactly what was read; a
// bulk transfer gets writes of 256 KiB after the first 32 KiB, and a
// source that never fills the buffer (one byte at a time, as an
// interactive connection) keeps it small.
func TestCopyGrowing(t *testing.T) {
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	var w writeSizes
	n, err := copyGrowing(&w, bytes.NewReader(data))
	if err != nil || n != int64(len(data)) || !bytes.Equal(w.Bytes(), data) {
		t.Fatalf("bulk: copied %d of %d, err %v, equal %v", n, len(data), err, bytes.Equal(w.Bytes(), data))
	}
	if w.sizes[0] != 32<<10 || w.sizes[1] != 256<<10 {
		t.Errorf("bulk: first writes %v, want 32 KiB then 256 KiB", w.sizes[:2])
	}

	w = writeSizes{}
	n, err = copyGrowing(&w, iotest.OneByteReader(bytes.NewReader(data[:100000])))
	if err != nil || n != 100000 || !bytes.Equal(w.Bytes(), data[:100000]) {
		t.Fatalf("one byte at a time: copied %d, err %v", n, err)
	}
	for _, s := range w.sizes {
		if s != 1 {
			t.Fatalf("one byte at a time: a write of %d", s)
		}
	}

	// A reader's error other than EOF is returned, with what was copied.
	n, err = copyGrowing(io.Discard, io.MultiReader(bytes.NewReader(data[:10]), iotest.ErrReader(io.ErrUnexpectedEOF)))
	if n != 10 || err != io.ErrUnexpectedEOF {
		t.Errorf("a failing reader: %d %v", n, err)
	}
}
