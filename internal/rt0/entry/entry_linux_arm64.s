#include "textflag.h"

// _rt0_moat is the entry point with -ldflags=-E=_rt0_moat (see the package
// docs of entry and rt0). The stack is as the kernel left it (argc, argv,
// envp, auxv), and only R0, R1 and R8 are changed before the runtime's
// entry, which reads nothing else. It sets the timer slack only: the
// pre-fault of amd64's entry has not been measured on arm64.
TEXT _rt0_moat(SB),NOSPLIT|NOFRAME,$0
	MOVD	$1, R0
	MOVW	R0, ·Entered(SB)
	MOVD	$30, R0		// PR_GET_TIMERSLACK
	MOVD	$167, R8	// SYS_prctl
	SVC
	CMP	$0, R0
	BLE	start		// an error: leave the slack alone
	MOVD	R0, ·Slack(SB)
	MOVD	$500000, R1
	CMP	R1, R0
	BGE	start		// inherited no finer: keep it
	MOVD	$29, R0		// PR_SET_TIMERSLACK
	MOVD	$500000, R1	// ns
	MOVD	$167, R8	// SYS_prctl
	SVC
	CMP	$0, R0
	BEQ	start
	MOVD	ZR, ·Slack(SB)	// refused: nothing to restore
start:
	B	_rt0_arm64_linux(SB)
