package harness

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestDeepShellLineNotParsed: a line nesting deeper than a parse may
// descend (a tenant's exec of ~150,000 "(" overflowed the daemon's stack,
// a fatal error; a reviewer's lines that fooled an estimate from the
// characters, quoted closers, chains across newlines, words ending in fi)
// is not parsed and is decided as hiding what it runs, under a stack of
// 64 MiB (this test crashes if the bound does not hold); the same shapes
// shallow parse, and ordinary lines are far below it (the control).
func TestDeepShellLineNotParsed(t *testing.T) {
	old := debug.SetMaxStack(64 << 20)
	defer debug.SetMaxStack(old)
	shapes := map[string]func(n int) string{
		"paren":   func(n int) string { return strings.Repeat("(", n) },
		"brace":   func(n int) string { return strings.Repeat("{ ", n) },
		"subst":   func(n int) string { return strings.Repeat("$(", n) },
		"and":     func(n int) string { return strings.Repeat("a && ", n) + "a" },
		"pipe":    func(n int) string { return strings.Repeat("a | ", n) + "a" },
		"pipenl":  func(n int) string { return strings.Repeat("a|\n", n) + "a" },
		"arith":   func(n int) string { return "echo $((" + strings.Repeat("1+", n) + "1))" },
		"arithp":  func(n int) string { return "$((" + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + "))" },
		"param":   func(n int) string { return strings.Repeat("${a:-", n) + strings.Repeat("}", n) },
		"if":      func(n int) string { return strings.Repeat("if a_fi; then ", n) + "a" + strings.Repeat("; fi", n) },
		"quoted":  func(n int) string { return strings.Repeat("(a ')'; ", n) },
		"escaped": func(n int) string { return strings.Repeat(`(a \); `, n) },
		"comment": func(n int) string { return strings.Repeat("( #)\n", n) },
		"mixed": func(n int) string {
			return "echo $((" + strings.Repeat(strings.Repeat("(", n/100+1)+"$(a "+strings.Repeat("]", n/100+1)+")+", 100)
		},
	}
	for name, mk := range shapes {
		for _, n := range []int{20, 150000} {
			src := mk(n)
			simples := split([]string{"sh", "-c", src})
			deep := false
			for _, c := range simples {
				deep = deep || c.hidden == tooNestedWhy()
			}
			if n > 1000 && !deep {
				t.Errorf("%s of %d: not refused as too deep: %v", name, n, simples[len(simples)-1].hidden)
			}
			if n < 1000 && deep {
				t.Errorf("%s of %d: refused as too deep", name, n)
			}
		}
	}
	for _, line := range []string{
		"cd src && make -j4 && ./test | tee log",
		"cat > a.py <<'EOF'\n" + strings.Repeat("def f(x):\n    if x: return (x + (1 * (2)))\n", 2000) + "EOF\n",
		"cat > a.js <<'EOF'\nnew Promise((resolve) => {\n" + strings.Repeat("  if (a && b || c) { f((x) => x + 1); }\n", 2000) + "});\nEOF\n",
		"for i in $(seq 1 10); do if [ $i -gt 2 ]; then echo $((i*2)); fi; done",
	} {
		for _, c := range split([]string{"bash", "-c", line}) {
			if c.hidden != "" {
				t.Errorf("an ordinary line hidden: %q: %s", line[:min(len(line), 60)], c.hidden)
			}
		}
	}
}

// TestShLinesReadAsDash: sh may be dash, which reads $'…' and ((…)) as
// other than bash does; what either would run is decided (a tester's
// sh -c "echo $'\\' ; . ./evil.sh ; #'" sourced a denied file).
func TestShLinesReadAsDash(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
match = { command = ["source", "*"] }
decision = "deny"

[[rules]]
match = { command = ["id"] }
decision = "deny"
`))
	for _, line := range []string{`echo $'\' ; . ./evil.sh ; #'`, `((id))`} {
		if d := rs.Decide(Action{Argv: []string{"sh", "-c", line}}); d.Verdict != Deny {
			t.Errorf("sh -c %q = %s, want deny", line, d.Verdict)
		}
	}
	if d := rs.Decide(Action{Argv: []string{"sh", "-c", "echo ok"}}); d.Verdict != Allow {
		t.Errorf("control: sh -c 'echo ok' = %s", d.Verdict)
	}
	if d := rs.Decide(Action{Argv: []string{"fish", "-c", "echo ok"}}); d.Verdict != Ask {
		t.Errorf("fish -c, a language moat does not read = %s, want ask", d.Verdict)
	}
	if d := rs.Decide(Action{Argv: []string{"bash", "-s", "--", "git", "push"}}); d.Verdict != Allow {
		t.Errorf("bash -s -- git push (arguments, not a script) = %s, want allow", d.Verdict)
	}
}

// TestNestedShellsBounded: a line nesting sh -c in sh -c, each level read
// again (twice for sh), is bounded in the script it parses in all (a
// reviewer's megabyte line, 17 deep, was hours of work), and asks.
func TestNestedShellsBounded(t *testing.T) {
	line := strings.Repeat("a ", 450000)
	for range 17 {
		line = `sh -c "` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace(line) + `"`
	}
	simples := split([]string{"sh", "-c", line})
	hidden := false
	for _, c := range simples {
		hidden = hidden || strings.Contains(c.hidden, "more script than moat reads")
	}
	if !hidden {
		t.Errorf("a line nesting 17 shells around 900 KB is not refused as too much to read")
	}
}

// TestShReadAsEveryShell: what a POSIX shell would run of a line bash
// reads otherwise, or fails to parse, is not let through (a reviewer's:
// a bash-only line 2 dropped dash's reading of line 1); bash -s -c runs
// its -c script.
func TestShReadAsEveryShell(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
match = { command = ["source", "*"] }
decision = "deny"
`))
	for _, argv := range [][]string{
		{"sh", "-c", "echo $'\\' ; . ./evil.sh ; #'\nfunction f { :; }"},
		{"sh", "-c", "((id))\na=(1)"},
		{"bash", "-s", "-c", ". ./evil.sh"},
	} {
		if d := rs.Decide(Action{Argv: argv}); d.Verdict == Allow {
			t.Errorf("%q = allow", argv)
		}
	}
	if d := rs.Decide(Action{Argv: []string{"sh", "-c", "echo ok; ls -l"}}); d.Verdict != Allow {
		t.Errorf("control: sh -c 'echo ok; ls -l' = %s", d.Verdict)
	}
}
