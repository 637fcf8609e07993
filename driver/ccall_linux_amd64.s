//go:build linux && amd64

#include "textflag.h"

// overlap_driver_ccall calls a C function on behalf of callC, with the C
// calling convention, on the system stack (runtime.cgocall's asmcgocall
// calls it with the frame in DI and SP 16-byte aligned). The frame is a
// driver.scratch:
//	0	fn
//	8	args[0] .. 88 args[10]
//	96	r
// The first six arguments go in DI, SI, DX, CX, R8, R9, the other five on
// the stack; AX is 0 (no vector registers used, for variadic callees).
// Only caller-saved registers are used. Frame: 40 bytes of outgoing
// arguments and 8 to keep the scratch pointer across the call, 48 in all,
// which with the assembler's BP save keeps SP 16-byte aligned at the call.
GLOBL ·ccallTrampoline(SB), NOPTR|RODATA, $8
DATA ·ccallTrampoline(SB)/8, $overlap_driver_ccall(SB)

TEXT overlap_driver_ccall(SB), NOSPLIT, $48
	MOVQ DI, 40(SP)
	MOVQ DI, R11
	MOVQ 56(R11), R10
	MOVQ R10, 0(SP)
	MOVQ 64(R11), R10
	MOVQ R10, 8(SP)
	MOVQ 72(R11), R10
	MOVQ R10, 16(SP)
	MOVQ 80(R11), R10
	MOVQ R10, 24(SP)
	MOVQ 88(R11), R10
	MOVQ R10, 32(SP)
	MOVQ 8(R11), DI
	MOVQ 16(R11), SI
	MOVQ 24(R11), DX
	MOVQ 32(R11), CX
	MOVQ 40(R11), R8
	MOVQ 48(R11), R9
	MOVQ 0(R11), R10
	XORL AX, AX
	CALL R10
	MOVQ 40(SP), DI
	MOVQ AX, 96(DI)
	RET
