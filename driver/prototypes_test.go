package driver

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCallsThroughWrappers checks that every driver call outside tests goes
// through a typed wrapper generated from prototypes.go (zcalls.go): no
// other file calls the call helpers of raw.go, which take packed uintptrs,
// but raw.go itself.
func TestCallsThroughWrappers(t *testing.T) {
	helpers := map[string]bool{"call": true, "callScratch": true, "callScratchOn": true, "syscallN": true}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var found []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "zcalls.go" || name == "raw.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if id, ok := c.Fun.(*ast.Ident); ok && helpers[id.Name] {
					found = append(found, fset.Position(c.Pos()).String()+": "+id.Name)
				}
			}
			return true
		})
	}
	assert.Empty(t, found, "driver calls that bypass the typed wrappers: declare them in prototypes.go")
}
