package calibrate

import (
	"errors"

	"github.com/purecuda/overlap/pipeline"
)

// goTogether runs each of fns at once, each on a goroutine of its own,
// and returns their errors joined. It is the one place where calibration
// starts goroutines: through pipeline.GoTogether, so that on a simulated
// device they are host actors that start together at the caller's virtual
// time and the virtual clock sees them run side by side. (Forked one by
// one from a goroutine that holds nothing, the first copier could finish
// in virtual time before the second was forked, and the pair then
// measured one copy's rate: TestMeasureValidateSim under load.)
func goTogether(b pipeline.Backend, fns ...func() error) error {
	errs := make([]error, len(fns))
	pipeline.GoTogether(b, "copier", len(fns), func(i int) { errs[i] = fns[i]() })
	return errors.Join(errs...)
}
