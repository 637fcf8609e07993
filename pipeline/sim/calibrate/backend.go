package calibrate

import (
	"errors"
	"sync"

	"github.com/purecuda/overlap/pipeline"
)

// goTogether runs each of fns at once, each on a goroutine of its own,
// and returns their errors joined. It is the one place where calibration
// starts goroutines, and the one place that knows the simulator: on a
// simulated device they are host actors that start together at the
// caller's virtual time, so that the virtual clock sees them run side by
// side.
func goTogether(b pipeline.Backend, fns ...func() error) error {
	errs := make([]error, len(fns))
	if s, ok := b.(*pipeline.Sim); ok {
		// Forked one by one from this goroutine, which holds nothing, the
		// first copier could finish in virtual time before the second was
		// forked, whenever this goroutine was descheduled between the two:
		// the pair then measured one copy's rate (TestMeasureValidateSim
		// under load).
		s.Host().GoTogether("copier", len(fns), func(i int) { errs[i] = fns[i]() })
		return errors.Join(errs...)
	}
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
