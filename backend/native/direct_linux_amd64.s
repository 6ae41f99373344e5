#include "textflag.h"

// func rawClone(nr, a1, a2, arg uintptr) (pid uintptr, errno uintptr)
//
// rawClone makes system call nr (clone or clone3) with a1 and a2 and no
// other arguments. In the parent it returns the result. The child starts
// on the stack the call gave it, calls childEntry(arg) there (ABI0) and
// exits if that ever returns. See direct_linux.go.
TEXT ·rawClone(SB),NOSPLIT,$0-48
	MOVQ	nr+0(FP), AX
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	arg+24(FP), R12 // survives the system call, which clobbers CX and R11
	MOVQ	$0, DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, pid+32(FP)
	NEGQ	AX
	MOVQ	AX, errno+40(FP)
	RET
ok:
	MOVQ	AX, pid+32(FP)
	MOVQ	$0, errno+40(FP)
	RET

child:
	// The kernel has switched to the new stack; nothing of the parent's
	// frame may be touched from here on.
	// An indirect call: childEntry calls rawClone again for the
	// command's process, and the linker's check of nosplit chains would
	// otherwise see a cycle.
	SUBQ	$16, SP
	MOVQ	R12, 0(SP)
	LEAQ	·childEntry(SB), R13
	CALL	R13
	MOVL	$111, DI
	MOVL	$231, AX // exit_group
	SYSCALL
	JMP	-3(PC)
