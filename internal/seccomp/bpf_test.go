package seccomp

import "fmt"

// check applies the kernel's checks of a classic seccomp program
// (bpf_check_classic and seccomp_check_filter) that our compiler could break.
func check(prog []Instruction) error {
	if len(prog) == 0 || len(prog) > maxInstructions {
		return fmt.Errorf("length %d", len(prog))
	}
	for pc, in := range prog {
		switch in.Code {
		case ldAbsW:
			if in.K >= 64 || in.K%4 != 0 {
				return fmt.Errorf("pc %d: load at %d", pc, in.K)
			}
		case andK, retK:
		case ja:
			if uint64(pc)+1+uint64(in.K) >= uint64(len(prog)) {
				return fmt.Errorf("pc %d: ja out of range", pc)
			}
		case jeq, jgt, jge, jset:
			if pc+1+int(in.Jt) >= len(prog) || pc+1+int(in.Jf) >= len(prog) {
				return fmt.Errorf("pc %d: jump out of range", pc)
			}
		default:
			return fmt.Errorf("pc %d: opcode %#x", pc, in.Code)
		}
	}
	if prog[len(prog)-1].Code != retK {
		return fmt.Errorf("last instruction is not ret")
	}
	return nil
}
