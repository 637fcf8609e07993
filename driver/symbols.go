package driver

import "github.com/purecuda/overlap/loader"

// symID indexes the symbol table. Each entry point the binding uses has
// exactly one row in symbols, and every call goes through that row. The
// constants and the table are generated from prototypes.go (zsymbols.go).
type symID int

// symbol is one row of the table: how to resolve the entry point, how many
// arguments it takes (its C prototype in NVIDIA's cuda.h), and whether a
// [Bound] with [BindOptions].DirectCalls may call it directly.
type symbol struct {
	loader.Symbol
	Args   int
	Direct bool
}

// The table, symbols (zsymbols.go), holds for each driver entry point the
// binding calls the plain name handed to cuGetProcAddress, the CUDA version
// whose ABI we bind, the versioned export name for drivers without
// cuGetProcAddress_v2, and the number of arguments, as prototypes.go
// declares them. Error messages name Export; tests check the table's shape.
