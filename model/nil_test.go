package model_test

import (
	"testing"

	"github.com/purecuda/overlap/model"
	"github.com/stretchr/testify/assert"
)

// TestNilAndZeroModel: every method of a nil or zero Model returns an
// error or a zero value, never a panic (In, Out, Widths and ParamBytes
// on a nil Model panicked before).
func TestNilAndZeroModel(t *testing.T) {
	for _, m := range []*model.Model{nil, {}} {
		name := "zero"
		if m == nil {
			name = "nil"
		}
		errs := map[string]func() error{
			"Check":  m.Check,
			"Kernel": func() error { _, err := m.Kernel(model.KernelOptions{}); return err },
			"Config": func() error { _, err := m.Config(0); return err },
			"Verify": func() error { return m.Verify(nil, nil, model.VerifyOptions{}) },
			"Forward": func() error {
				_, err := m.Forward(nil)
				return err
			},
			"Forward32":       func() error { _, err := m.Forward32(nil); return err },
			"CheckInput":      func() error { _, err := m.CheckInput(8, 8); return err },
			"CheckInputBytes": func() error { _, err := m.CheckInputBytes(32); return err },
			"Write":           func() error { return m.Write(nil) },
			"Compare": func() error {
				_, err := m.Compare(nil, nil, nil, model.CompareOptions{})
				return err
			},
			"WriteFile": func() error { return m.WriteFile(t.TempDir() + "/m.safetensors") },
		}
		for op, fn := range errs {
			var err error
			assert.NotPanics(t, func() { err = fn() }, "%s: %s", name, op)
			assert.Error(t, err, "%s: %s", name, op)
		}
		assert.NotPanics(t, func() {
			assert.Zero(t, m.In())
			assert.Zero(t, m.Out())
			assert.Nil(t, m.Widths())
			assert.Zero(t, m.ParamBytes())
			assert.Zero(t, m.FLOPsPerRow())
			assert.Nil(t, m.Tensors())
			assert.Equal(t, "no layers", m.String())
			m.DefaultChunkRows()
			var l *model.Layer
			l.Forward32(nil, nil, 0, model.ReLU, false)
		}, name)
	}
}
