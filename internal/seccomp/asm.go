package seccomp

import "fmt"

// Classic BPF opcodes used by the compiler (linux/bpf_common.h).
const (
	ldAbsW = 0x20 // BPF_LD | BPF_W | BPF_ABS: A = seccomp_data[k:k+4]
	andK   = 0x54 // BPF_ALU | BPF_AND | BPF_K: A &= k
	ja     = 0x05 // BPF_JMP | BPF_JA: pc += k
	jeq    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K: A == k
	jgt    = 0x25 // BPF_JMP | BPF_JGT | BPF_K: A > k
	jge    = 0x35 // BPF_JMP | BPF_JGE | BPF_K: A >= k
	jset   = 0x45 // BPF_JMP | BPF_JSET | BPF_K: A & k != 0
	retK   = 0x06 // BPF_RET | BPF_K: return k
)

// Offsets in struct seccomp_data. Both architectures are little-endian, so
// the low half of argument i comes first.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

func argLow(i uint) uint32  { return offArgs + 8*uint32(i) }
func argHigh(i uint) uint32 { return argLow(i) + 4 }

// label names a position in the program; jumps refer to labels and assemble
// turns them into offsets.
type label int

// next, as a jump target, is the instruction right after the jump.
const next label = 0

// item is an instruction, or (when isLabel) the definition of a label at the
// next instruction. Conditional jumps use jt and jf, ja uses jt.
type item struct {
	isLabel bool
	lbl     label
	code    uint16
	k       uint32
	jt, jf  label
}

type compiler struct {
	items  []item
	labels int
	leaves map[string]label // leaf code already scheduled, by leaf key
	queue  []leaf           // leaves to emit after the search tree
}

func (c *compiler) newLabel() label {
	c.labels++
	return label(c.labels)
}

func (c *compiler) label(l label)       { c.items = append(c.items, item{isLabel: true, lbl: l}) }
func (c *compiler) ldAbs(off uint32)    { c.items = append(c.items, item{code: ldAbsW, k: off}) }
func (c *compiler) and(k uint32)        { c.items = append(c.items, item{code: andK, k: k}) }
func (c *compiler) ret(k uint32)        { c.items = append(c.items, item{code: retK, k: k}) }
func (c *compiler) jumpTo(target label) { c.items = append(c.items, item{code: ja, jt: target}) }

// jump emits a conditional jump to jt if the condition holds, else to jf.
func (c *compiler) jump(code uint16, k uint32, jt, jf label) {
	if jt != next && jf != next {
		c.items = append(c.items, item{code: code, k: k, jt: jt, jf: jf})
		return
	}
	n := c.newLabel()
	if jt == next {
		jt = n
	}
	if jf == next {
		jf = n
	}
	c.items = append(c.items, item{code: code, k: k, jt: jt, jf: jf})
	c.label(n)
}

// search emits a binary search over the intervals (sorted by start, the first
// starting at 0) that ends at each interval's leaf, then the leaves. The
// system-call number must be in A.
func (c *compiler) search(iv []interval) {
	c.leaves = map[string]label{}
	if len(iv) == 1 {
		c.jumpTo(c.leafLabel(iv[0].leaf))
	} else {
		c.node(iv)
	}
	for i := 0; i < len(c.queue); i++ {
		l := c.queue[i]
		c.label(c.leaves[l.key()])
		c.leafCode(l)
	}
}

func (c *compiler) node(iv []interval) {
	mid := len(iv) / 2
	left, right := c.target(iv[:mid]), c.target(iv[mid:])
	c.jump(jge, iv[mid].start, right, left)
	c.subtree(iv[:mid], left)
	c.subtree(iv[mid:], right)
}

// target is where the search continues for iv: the leaf of a single
// interval, else a new subtree.
func (c *compiler) target(iv []interval) label {
	if len(iv) == 1 {
		return c.leafLabel(iv[0].leaf)
	}
	return c.newLabel()
}

// subtree emits the search among iv at l, unless iv is a single leaf.
func (c *compiler) subtree(iv []interval, l label) {
	if len(iv) > 1 {
		c.label(l)
		c.node(iv)
	}
}

func (c *compiler) leafLabel(l leaf) label {
	k := l.key()
	if lbl, ok := c.leaves[k]; ok {
		return lbl
	}
	lbl := c.newLabel()
	c.leaves[k] = lbl
	c.queue = append(c.queue, l)
	return lbl
}

// leafCode tries the rules of one system call in order, then the default.
func (c *compiler) leafCode(l leaf) {
	for _, r := range l.rules {
		fail := c.newLabel()
		for _, a := range r.Args {
			c.arg(a, fail)
		}
		c.ret(r.Action.ret(r.Errno))
		if len(r.Args) == 0 {
			return // the rule always decides
		}
		c.label(fail)
	}
	c.ret(l.defaultRet)
}

// arg emits a 64-bit comparison made of 32-bit halves: it continues after
// the emitted code when a matches and jumps to fail when not.
func (c *compiler) arg(a Arg, fail label) {
	ok := c.newLabel()
	lo, hi := argLow(a.Index), argHigh(a.Index)
	vlo, vhi := uint32(a.Value), uint32(a.Value>>32)
	switch a.Op {
	case EQ:
		c.ldAbs(hi)
		c.jump(jeq, vhi, next, fail)
		c.ldAbs(lo)
		c.jump(jeq, vlo, ok, fail)
	case NE:
		c.ldAbs(hi)
		c.jump(jeq, vhi, next, ok)
		c.ldAbs(lo)
		c.jump(jeq, vlo, fail, ok)
	case GT, GE:
		// High half greater: match; equal: decide on the low half.
		c.ldAbs(hi)
		c.jump(jgt, vhi, ok, next)
		c.jump(jeq, vhi, next, fail)
		c.ldAbs(lo)
		if a.Op == GT {
			c.jump(jgt, vlo, ok, fail)
		} else {
			c.jump(jge, vlo, ok, fail)
		}
	case LT, LE:
		// High half greater: no match; less: match; equal: low half.
		c.ldAbs(hi)
		c.jump(jgt, vhi, fail, next)
		c.jump(jeq, vhi, next, ok)
		c.ldAbs(lo)
		if a.Op == LT {
			c.jump(jge, vlo, fail, ok)
		} else {
			c.jump(jgt, vlo, fail, ok)
		}
	case MaskedEQ:
		mask, want := a.Value, a.ValueTwo
		if want&^mask != 0 {
			c.jumpTo(fail) // bits outside the mask never match
			break
		}
		c.masked(hi, uint32(mask>>32), uint32(want>>32), fail)
		c.masked(lo, uint32(mask), uint32(want), fail)
	default:
		panic("seccomp: invalid operator " + a.Op.String())
	}
	c.label(ok)
}

// masked checks one half of a MaskedEQ; a zero mask half always matches
// (want is within the mask), so it emits nothing.
func (c *compiler) masked(off, mask, want uint32, fail label) {
	if mask == 0 {
		return
	}
	c.ldAbs(off)
	if mask != 0xffffffff {
		c.and(mask)
	}
	c.jump(jeq, want, next, fail)
}

// assemble resolves labels to offsets. A conditional jump reaches at most 255
// instructions ahead; a farther target gets a trampoline, an unconditional
// jump (32-bit offset) placed right after the conditional one. Inserting one
// can push other jumps out of reach, so it repeats until none is.
func (c *compiler) assemble() ([]Instruction, error) {
	for {
		pos := map[label]int{}
		n := 0
		for _, it := range c.items {
			if it.isLabel {
				pos[it.lbl] = n
			} else {
				n++
			}
		}
		offset := func(at int, l label) (int, error) {
			p, ok := pos[l]
			if !ok {
				return 0, fmt.Errorf("internal error: label %d not placed", l)
			}
			if p <= at {
				return 0, fmt.Errorf("internal error: backward jump at %d", at)
			}
			return p - at - 1, nil
		}

		prog := make([]Instruction, 0, n)
		var fixed []item
		far := false
		for _, it := range c.items {
			if it.isLabel {
				fixed = append(fixed, it)
				continue
			}
			at := len(prog)
			in := Instruction{Code: it.code, K: it.k}
			var trampolines []item
			switch it.code {
			case ja:
				off, err := offset(at, it.jt)
				if err != nil {
					return nil, err
				}
				in.K = uint32(off)
			case jeq, jgt, jge, jset:
				var offs [2]int
				for i, br := range []*label{&it.jt, &it.jf} {
					off, err := offset(at, *br)
					if err != nil {
						return nil, err
					}
					if off > 255 {
						t := c.newLabel()
						trampolines = append(trampolines, item{isLabel: true, lbl: t}, item{code: ja, jt: *br})
						*br = t
						far = true
					}
					offs[i] = off
				}
				// When far, this pass's program is discarded and the next
				// one computes the offsets to the trampolines.
				in.Jt, in.Jf = uint8(offs[0]), uint8(offs[1])
			}
			prog = append(prog, in)
			fixed = append(fixed, it)
			fixed = append(fixed, trampolines...)
		}
		c.items = fixed
		if !far {
			return prog, nil
		}
	}
}
