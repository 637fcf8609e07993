package model_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/purecuda/overlap/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modelWord matches the package word where an error's text can hold it:
// at the start or after a colon.
var modelWord = regexp.MustCompile(`(^|: )model: `)

// TestErrorsSayModelOnce walks representative errors, from the file, the
// reader, the options and the checks, and fails on any that does not start
// with "model: " or says it more than once (a wrapped error of the
// package's own, say).
func TestErrorsSayModelOnce(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.safetensors")
	require.NoError(t, os.WriteFile(short, []byte("1234"), 0o644))
	empty := filepath.Join(dir, "empty.safetensors")
	require.NoError(t, os.WriteFile(empty, []byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"), 0o644))
	m, err := model.Random([]int{4, 3, 2}, model.ReLU, 1)
	require.NoError(t, err)

	_, missing := model.Load(filepath.Join(dir, "none.safetensors"), model.Options{})
	_, tooShort := model.Load(short, model.Options{})
	_, noLayers := model.Load(empty, model.Options{})
	_, readShort := model.ReadSafetensorsFile(short)
	_, badWidths := model.Random([]int{4}, model.ReLU, 1)
	_, badAct := model.ParseActivation("tanh")
	_, badPrec := model.ParsePrecision("fp8")
	_, badRows := m.CheckInput(7, 4)
	_, nilConfig := (*model.Model)(nil).Config(0)
	errs := []error{
		missing, tooShort, noLayers, readShort, badWidths, badAct, badPrec, badRows, nilConfig,
		(*model.Model)(nil).Check(), m.CheckFits(1), m.Verify(make([]float32, 4), make([]float32, 3), model.VerifyOptions{}),
		m.WriteFile(filepath.Join(dir, "no", "such", "dir.safetensors")),
	}
	for i, err := range errs {
		if !assert.Error(t, err, "error %d", i) {
			continue
		}
		assert.Len(t, modelWord.FindAllString(err.Error(), -1), 1, "error %d: %v", i, err)
		assert.Regexp(t, `^model: `, err.Error(), "error %d", i)
	}
}
