package termsafe

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/internal/pty"
)

// TestSetParserPerTerminal: writers to one terminal share a parser, and
// writers to two terminals do not (a string begun on one was ended, in a
// shared parser's view, by a write to the other, found by a reviewer).
func TestSetParserPerTerminal(t *testing.T) {
	open := func() (*os.File, *os.File) {
		m, p, err := pty.Open(24, 80)
		if err != nil {
			t.Skipf("no pseudo-terminal: %v", err)
		}
		t.Cleanup(func() { m.Close(); p.Close() })
		return m, p
	}
	ma, a := open()
	mb, b := open()
	var s Set
	wa, wa2, wb := s.Wrap(a), s.Wrap(a), s.Wrap(b)
	if wa.(*Writer).p != wa2.(*Writer).p || wa.(*Writer).p == wb.(*Writer).p {
		t.Fatal("one parser per terminal: want the same for a twice, another for b")
	}
	wa.Write([]byte("x\x1b]0;t"))
	wb.Write([]byte("\x07y\n"))
	s.Close()
	a.Close()
	b.Close()
	read := func(m *os.File) string {
		m.SetReadDeadline(time.Now().Add(2 * time.Second))
		out, _ := io.ReadAll(m)
		return string(out)
	}
	if got := read(ma); !strings.HasPrefix(got, "x\x1b]0;t\x1b\\") {
		t.Errorf("terminal a got %q: want its title ended by ST", got)
	}
	if got := read(mb); !strings.HasPrefix(got, "\x07y") {
		t.Errorf("terminal b got %q", got)
	}
}
