#include "textflag.h"

// func fillNT(p *float32, n int, bits uint32)
TEXT ·fillNT(SB), NOSPLIT, $0-20
	MOVQ p+0(FP), DI
	MOVQ n+8(FP), CX
	MOVL bits+16(FP), AX
	MOVQ AX, DX
	SHLQ $32, DX
	ORQ  DX, AX // bits in both halves, for 8-byte stores
	TESTQ CX, CX
	JZ   done
	TESTQ $4, DI // a float32 is 4-aligned; make p 8-aligned
	JZ   aligned
	MOVNTIL AX, (DI)
	ADDQ $4, DI
	DECQ CX
aligned:
	MOVQ CX, BX
	SHRQ $3, BX // 32-byte blocks
	JZ   pairs
block:
	MOVNTIQ AX, 0(DI)
	MOVNTIQ AX, 8(DI)
	MOVNTIQ AX, 16(DI)
	MOVNTIQ AX, 24(DI)
	ADDQ $32, DI
	DECQ BX
	JNZ  block
pairs:
	MOVQ CX, BX
	ANDQ $7, BX
	SHRQ $1, BX
	JZ   last
pair:
	MOVNTIQ AX, (DI)
	ADDQ $8, DI
	DECQ BX
	JNZ  pair
last:
	TESTQ $1, CX
	JZ   done
	MOVNTIL AX, (DI)
done:
	SFENCE
	RET
