#include "textflag.h"

// _rt0_moat is the entry point with -ldflags=-E=_rt0_moat (see the package
// doc). The stack is as the kernel left it (argc, argv, envp, auxv), and
// only AX, DI, SI, CX and R11 are changed before the runtime's entry, which
// reads nothing else.
TEXT _rt0_moat(SB),NOSPLIT|NOFRAME,$0
	MOVL	$1, ·entered(SB)
	MOVQ	$157, AX	// SYS_prctl
	MOVQ	$30, DI		// PR_GET_TIMERSLACK
	SYSCALL
	CMPQ	AX, $0
	JLE	start		// an error: leave the slack alone
	MOVQ	AX, ·entrySlack(SB)
	CMPQ	AX, $500000
	JGE	start		// inherited no finer: keep it
	MOVQ	$157, AX	// SYS_prctl
	MOVQ	$29, DI		// PR_SET_TIMERSLACK
	MOVQ	$500000, SI	// ns
	SYSCALL
	CMPQ	AX, $0
	JEQ	start
	MOVQ	$0, ·entrySlack(SB)	// refused: nothing to restore
start:
	JMP	_rt0_amd64_linux(SB)
