#include "textflag.h"

// POPULATE maps [lo &^ 4095, hi) with madvise(advice); an error (an old
// kernel without MADV_POPULATE_*) changes nothing.
#define POPULATE(lo, hi, advice) \
	LEAQ	lo, DI \
	ANDQ	$~4095, DI \
	LEAQ	hi, SI \
	SUBQ	DI, SI \
	MOVQ	advice, DX \
	MOVQ	$28, AX	/* SYS_madvise */ \
	SYSCALL

// _rt0_moat is the entry point with -ldflags=-E=_rt0_moat (see the package
// docs of entry and rt0). The stack is as the kernel left it (argc, argv,
// envp, auxv), and only AX, DX, DI, SI, CX and R11 are changed before the
// runtime's entry, which reads nothing but the stack.
TEXT _rt0_moat(SB),NOSPLIT|NOFRAME,$0
	MOVL	$1, ·Entered(SB)
	// A helper's argv[0] begins "moat-": leave its faults lazy.
	MOVQ	0(SP), AX	// argc
	CMPQ	AX, $0
	JEQ	prefault
	MOVQ	8(SP), AX	// argv[0]
	CMPL	(AX), $0x74616f6d	// "moat", little-endian
	JNE	prefault
	CMPB	4(AX), $0x2d	// '-'
	JEQ	slack
prefault:
	MOVL	$1, ·front(SB)
	POPULATE(runtime·text(SB), runtime·etext(SB), $22)	// code; MADV_POPULATE_READ
	POPULATE(runtime·rodata(SB), runtime·erodata(SB), $22)	// .rodata, not the function tables
	// The type data: inside .rodata up to Go 1.26, mapped just above; from
	// Go 1.27 on in a section of its own after the function tables.
	LEAQ	runtime·types(SB), AX
	LEAQ	runtime·erodata(SB), CX
	CMPQ	AX, CX
	JB	data
	POPULATE(runtime·types(SB), runtime·etypes(SB), $22)	// MADV_POPULATE_READ
data:
	POPULATE(runtime·noptrdata(SB), runtime·ebss(SB), $23)	// .noptrdata, .data, .bss; MADV_POPULATE_WRITE
slack:
	MOVQ	$157, AX	// SYS_prctl
	MOVQ	$30, DI		// PR_GET_TIMERSLACK
	SYSCALL
	CMPQ	AX, $0
	JLE	start		// an error: leave the slack alone
	MOVQ	AX, ·Slack(SB)
	CMPQ	AX, $500000
	JGE	start		// inherited no finer: keep it
	MOVQ	$157, AX	// SYS_prctl
	MOVQ	$29, DI		// PR_SET_TIMERSLACK
	MOVQ	$500000, SI	// ns
	SYSCALL
	CMPQ	AX, $0
	JEQ	start
	MOVQ	$0, ·Slack(SB)	// refused: nothing to restore
start:
	JMP	_rt0_amd64_linux(SB)

// func madvise(addr, n, advice uintptr) uintptr
TEXT ·madvise(SB),NOSPLIT,$0-32
	MOVQ	addr+0(FP), DI
	MOVQ	n+8(FP), SI
	MOVQ	advice+16(FP), DX
	MOVQ	$28, AX		// SYS_madvise
	SYSCALL
	MOVQ	AX, ret+24(FP)
	RET
