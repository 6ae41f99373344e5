package workspace

// A line diff: Myers' O(ND) algorithm ("An O(ND) Difference Algorithm and
// Its Variations", 1986) over interned lines, after trimming the common
// prefix and suffix. It keeps one V array per edit step to walk back the
// path, so memory grows as D²; past maxEditSteps the remaining middle is
// given as "delete all, insert all", which is still a correct diff, only
// not a minimal one. Written here rather than imported: the well-known Go
// diff libraries are either unmaintained (go-difflib) or character-based
// (go-diff), and this is about a hundred lines.

// maxEditSteps bounds the work on one file (about 8 MB of V arrays).
const maxEditSteps = 1000

type editOp byte

const (
	opEqual  editOp = ' '
	opDelete editOp = '-'
	opInsert editOp = '+'
)

// edit is one line of the script: a line of a (delete, equal) at index A
// and/or of b (insert, equal) at index B.
type edit struct {
	op   editOp
	a, b int
}

// diffLines returns an edit script turning a into b.
func diffLines(a, b []string) []edit {
	ids := map[string]int{}
	intern := func(lines []string) []int {
		out := make([]int, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	x, y := intern(a), intern(b)
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var script []edit
	for i := 0; i < pre; i++ {
		script = append(script, edit{opEqual, i, i})
	}
	for _, e := range myers(x[pre:len(x)-suf], y[pre:len(y)-suf]) {
		script = append(script, edit{e.op, e.a + pre, e.b + pre})
	}
	for i := suf; i > 0; i-- {
		script = append(script, edit{opEqual, len(x) - i, len(y) - i})
	}
	return script
}

func myers(a, b []int) []edit {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(n, m)
	}
	limit := min(n+m, maxEditSteps)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int
	for d := 0; d <= limit; d++ {
		trace = append(trace, append([]int(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, n, m)
			}
		}
	}
	return replaceAll(n, m)
}

// backtrack walks the saved V arrays from (n, m) back to (0, 0).
// trace[d] holds V as it was before step d, for k in [-d-1, d+1].
func backtrack(trace [][]int, n, m int) []edit {
	var rev []edit
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		v := trace[d]
		get := func(k int) int { return v[k+d+1] }
		k := x - y
		var prevK int
		if k == -d || (k != d && get(k-1) < get(k+1)) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := 0
		if d > 0 {
			prevX = get(prevK)
		}
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			rev = append(rev, edit{opEqual, x, y})
		}
		if d == 0 {
			break
		}
		if x == prevX {
			y--
			rev = append(rev, edit{opInsert, x, y})
		} else {
			x--
			rev = append(rev, edit{opDelete, x, y})
		}
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

func replaceAll(n, m int) []edit {
	script := make([]edit, 0, n+m)
	for i := 0; i < n; i++ {
		script = append(script, edit{opDelete, i, 0})
	}
	for j := 0; j < m; j++ {
		script = append(script, edit{opInsert, n, j})
	}
	return script
}

// hunk is a run of edits with up to ctx lines of context on each side.
type hunk struct {
	aStart, aLen, bStart, bLen int // 0-based starts
	edits                      []edit
}

// hunks groups an edit script into unified-diff hunks with ctx lines of
// context, merging changes whose contexts touch or overlap.
func hunks(script []edit, ctx int) []hunk {
	type span struct{ s, e int }
	var groups []span
	for i := 0; i < len(script); {
		if script[i].op == opEqual {
			i++
			continue
		}
		j := i
		for j < len(script) && script[j].op != opEqual {
			j++
		}
		if n := len(groups); n > 0 && i-groups[n-1].e <= 2*ctx {
			groups[n-1].e = j
		} else {
			groups = append(groups, span{i, j})
		}
		i = j
	}
	out := make([]hunk, 0, len(groups))
	for _, g := range groups {
		s, e := max(0, g.s-ctx), min(len(script), g.e+ctx)
		h := hunk{aStart: script[s].a, bStart: script[s].b, edits: script[s:e]}
		for _, ed := range h.edits {
			if ed.op != opInsert {
				h.aLen++
			}
			if ed.op != opDelete {
				h.bLen++
			}
		}
		out = append(out, h)
	}
	return out
}
