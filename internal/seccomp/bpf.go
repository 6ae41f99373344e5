package seccomp

import (
	"encoding/binary"
	"fmt"
)

// This file is a classic-BPF interpreter for seccomp programs, so that the
// compiled programs can be checked without a kernel: by the tests, and by
// Summarize.

// data is struct seccomp_data.
type data struct {
	nr   uint32
	arch uint32
	ip   uint64
	args [6]uint64
}

func (d data) bytes() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], d.nr)
	binary.LittleEndian.PutUint32(b[4:], d.arch)
	binary.LittleEndian.PutUint64(b[8:], d.ip)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// run executes prog over d and returns the filter's result and the number of
// instructions executed.
func run(prog []Instruction, d data) (ret uint32, steps int, err error) {
	mem := d.bytes()
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		steps++
		in := prog[pc]
		switch in.Code {
		case ldAbsW:
			if in.K+4 > uint32(len(mem)) {
				return 0, steps, fmt.Errorf("pc %d: load out of range", pc)
			}
			a = binary.LittleEndian.Uint32(mem[in.K:])
		case andK:
			a &= in.K
		case ja:
			pc += int(in.K)
		case jeq, jgt, jge, jset:
			var cond bool
			switch in.Code {
			case jeq:
				cond = a == in.K
			case jgt:
				cond = a > in.K
			case jge:
				cond = a >= in.K
			case jset:
				cond = a&in.K != 0
			}
			if cond {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case retK:
			return in.K, steps, nil
		default:
			return 0, steps, fmt.Errorf("pc %d: unknown opcode %#x", pc, in.Code)
		}
	}
	return 0, steps, fmt.Errorf("fell off the end")
}

// decision renders a filter result for test tables.
func decision(ret uint32) string {
	switch ret & 0xffff0000 {
	case retAllow:
		return "allow"
	case retErrno:
		return fmt.Sprintf("errno %d", ret&retData)
	case retKillProcess:
		return "kill-process"
	case retKillThread:
		return "kill-thread"
	case retTrap:
		return "trap"
	case retLog:
		return "log"
	}
	return fmt.Sprintf("%#x", ret)
}
