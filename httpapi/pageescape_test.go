package httpapi

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/moatbox/moat/workspace"
)

// TestPageEscapesWhatMustEscape: the approvals page escapes exactly the
// characters workspace.MustEscape names, which the terminal's question,
// moat approvals and the MCP server's question escape: the page's list
// had only the controls and lost step with the table, so zero-width
// spaces and a Hangul filler shown as a blank hid an asked command's
// words there (found by a tester). Its regular expression's character
// class is read from the script and compared over every code point.
func TestPageEscapesWhatMustEscape(t *testing.T) {
	m := regexp.MustCompile(`const unsafe = /\[([^\]]*)\]/gu;`).FindSubmatch(pageJS)
	if m == nil {
		t.Fatal("approvals.js has no `const unsafe = /[...]/gu;`")
	}
	class := string(m[1])
	point := regexp.MustCompile(`^\\u(?:\{([0-9a-fA-F]+)\}|([0-9a-fA-F]{4}))`)
	next := func() rune {
		p := point.FindStringSubmatch(class)
		if p == nil {
			t.Fatalf("approvals.js: cannot read the class at %q", class)
		}
		class = class[len(p[0]):]
		n, _ := strconv.ParseUint(p[1]+p[2], 16, 32)
		return rune(n)
	}
	in := map[rune]bool{}
	for class != "" {
		lo := next()
		hi := lo
		if strings.HasPrefix(class, "-") {
			class = class[1:]
			hi = next()
		}
		for r := lo; r <= hi; r++ {
			in[r] = true
		}
	}
	var missing, extra int
	for r := rune(0); r <= 0x10ffff; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue // no string from the daemon holds one
		}
		switch must := workspace.MustEscape(r); {
		case must && !in[r]:
			if missing++; missing <= 5 {
				t.Errorf("the page shows U+%04X as it is; workspace.MustEscape escapes it", r)
			}
		case !must && in[r]:
			if extra++; extra <= 5 {
				t.Errorf("the page escapes U+%04X; workspace.MustEscape does not", r)
			}
		}
	}
	// The control: the class names some.
	if len(in) < 100 {
		t.Errorf("the page's class names %d characters", len(in))
	}
}
