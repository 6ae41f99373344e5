package harness

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestDeepShellLineNotParsed: a line nesting deeper than the parser can
// take (a tenant's exec of ~150,000 "(" overflowed the daemon's stack, a
// fatal error) is not parsed, and is decided as hiding what it runs; the
// same shapes within the bound parse (under a stack of 64 MiB, a crash
// of this test if the estimate were low), and ordinary lines are far
// below it (the control).
func TestDeepShellLineNotParsed(t *testing.T) {
	old := debug.SetMaxStack(64 << 20)
	defer debug.SetMaxStack(old)
	shapes := map[string]func(n int) string{
		"paren":   func(n int) string { return strings.Repeat("(", n) },
		"brace":   func(n int) string { return strings.Repeat("{ ", n) },
		"subst":   func(n int) string { return strings.Repeat("$(", n) },
		"and":     func(n int) string { return strings.Repeat("a && ", n) + "a" },
		"pipe":    func(n int) string { return strings.Repeat("a | ", n) + "a" },
		"arith":   func(n int) string { return "echo $((" + strings.Repeat("1+", n) + "1))" },
		"arithp":  func(n int) string { return "$((" + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + "))" },
		"param":   func(n int) string { return strings.Repeat("${a:-", n) + strings.Repeat("}", n) },
		"if":      func(n int) string { return strings.Repeat("if a; then ", n) + "a" + strings.Repeat("; fi", n) },
		"dq":      func(n int) string { return strings.Repeat("\"$(", n) },
		"case":    func(n int) string { return strings.Repeat("case a in a) ", n) },
		"test":    func(n int) string { return "[[ " + strings.Repeat("( ", n) + "a" + strings.Repeat(" )", n) + " ]]" },
		"testand": func(n int) string { return "[[ " + strings.Repeat("a && ", n) + "a ]]" },
		"quoted":  func(n int) string { return "echo don't; " + strings.Repeat("(", n) },
		"heredoc": func(n int) string { return "cat <<'EOF'\n'\nEOF\n" + strings.Repeat("(", n) },
	}
	for name, mk := range shapes {
		for _, n := range []int{100, 1000, 1990, 2500, 150000} {
			src := mk(n)
			why := tooNested(src)
			if n >= 2500 && why == "" {
				t.Errorf("%s of %d: not refused (estimate %d)", name, n, shellNesting(src))
			}
			simples := split([]string{"sh", "-c", src})
			last := simples[len(simples)-1]
			if why != "" && last.hidden != why {
				t.Errorf("%s of %d: decided as %q, want %q", name, n, last.hidden, why)
			}
		}
	}
	for _, line := range []string{
		"cd src && make -j4 && ./test | tee log",
		"cat > a.py <<'EOF'\n" + strings.Repeat("def f(x):\n    if x: return (x + (1 * (2)))\n", 500) + "EOF\n",
		"for i in $(seq 1 10); do if [ $i -gt 2 ]; then echo $((i*2)); fi; done",
	} {
		if why := tooNested(line); why != "" {
			t.Errorf("an ordinary line refused: %q: %s", line[:min(len(line), 60)], why)
		}
	}
}
