package bench

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// OptionError is an option that a benchmark refuses: what the Check
// functions return, and what the benchmarks return inside their *[Error]
// when given options that they cannot run. Its text names each option as
// its field is called (Error writes "ChunkElems 3: ..."); Text writes
// the names a caller gives them instead, such as a command's flags.
type OptionError struct {
	// Option is the field at fault: the first one that the text names.
	Option string
	format string // with each field written {Field}
	args   []any
}

// optionFields matches a field's name in an OptionError's format.
var optionFields = regexp.MustCompile(`\{[A-Z][A-Za-z]*\}`)

// optionErr is an *OptionError whose format names fields as {Field}, the
// first of them the one at fault.
func optionErr(format string, args ...any) *OptionError {
	field := strings.Trim(optionFields.FindString(format), "{}")
	return &OptionError{Option: field, format: format, args: args}
}

func (e *OptionError) Error() string { return e.Text(nil) }

// Text is the error with each field named by name (a nil name, or one
// that returns "", keeps the field's own name).
func (e *OptionError) Text(name func(field string) string) string {
	f := optionFields.ReplaceAllStringFunc(e.format, func(m string) string {
		field := m[1 : len(m)-1]
		if name != nil {
			if n := name(field); n != "" {
				return n
			}
		}
		return field
	})
	return fmt.Sprintf(f, e.args...)
}

// What one pass over a job (a synchronous baseline, a pipeline run, the
// stages alone) may cost, so that a job that cannot finish in reasonable
// time is refused before it runs rather than left to run for hours. The
// seed kernel's work is its elements times its iterations: an H200 did
// 128M elements of 100 iterations in 13.45 ms, about 1e12 a second, and
// the simulator computes each on the CPU, some 3e7 a second per core on
// the 2-core development machine (2026-12-01). A chunk costs several
// driver calls on a GPU (a few µs) and 0.1-0.3 ms of CPU on the
// simulator. The bounds refuse what is hopeless, not what is merely slow.
const (
	// MaxGPUIterWork is about 100 s on an H200.
	MaxGPUIterWork = 1e14
	// MaxSimIterWork is about 2 CPU-hours: minutes on a large host, an
	// hour on a laptop. The simulator's default job (4M elements of 100
	// iterations) is 4.2e8, 1G elements of 100 are 1.1e11.
	MaxSimIterWork = 2e11
	MaxGPUChunks   = 1 << 22
	MaxSimChunks   = 1 << 20
	// MaxElems bounds a job's elements: 2^32-1 is the kernels' unsigned
	// count.
	MaxElems = 1<<32 - 1
	// MinStreamChunk is a streaming run's smallest chunk: one 4 KiB page
	// per input. Each chunk is a read and a write call and several driver
	// calls, and a chunk of 3 elements streamed a 4 MiB file for over a
	// minute on the simulator.
	MinStreamChunk = 1024
)

// sci renders a large count as 8.4e15.
func sci(x float64) string { return sciTo(x, 2) }

// sciTo is sci with digits significant digits.
func sciTo(x float64, digits int) string {
	return strings.Replace(fmt.Sprintf("%.*g", digits, x), "e+", "e", 1)
}

// sciOver renders x, which is over limit, with the digits it takes not
// to read as limit: 2.01e11 over 2e11, not 2e11 "at most 2e11".
func sciOver(x, limit float64) string {
	for d := 2; d <= 17; d++ { // 17 digits tell any two float64s apart
		if s := sciTo(x, d); s != sci(limit) {
			return s
		}
	}
	return sciTo(x, 17)
}

// CheckWork refuses a seed job of elems elements at iters iterations
// that one pass could not finish in reasonable time on the simulator
// (sim) or a GPU: an *OptionError naming Iters and Elems.
func CheckWork(elems int64, iters int, sim bool) error {
	return checkWork(elems, iters, sim, strconv.FormatInt(elems, 10)+" elements", "{Iters} or {Elems}")
}

// checkWork is CheckWork with what saying what the elements are and
// lower what to lower.
func checkWork(elems int64, iters int, sim bool, what, lower string) error {
	work := float64(elems) * float64(max(iters, 1))
	switch {
	case sim && work > MaxSimIterWork:
		return optionErr("{Iters} %d over %s is %s kernel iterations per pass; the simulator computes each one on the CPU and takes at most %s per pass: lower "+lower,
			iters, what, sciOver(work, MaxSimIterWork), sci(MaxSimIterWork))
	case !sim && work > MaxGPUIterWork:
		return optionErr("{Iters} %d over %s is %s kernel iterations per pass; a run takes at most %s per pass (about 100 s on an NVIDIA H200): lower "+lower,
			iters, what, sciOver(work, MaxGPUIterWork), sci(MaxGPUIterWork))
	}
	return nil
}

// CheckChunks refuses a job of elems elements cut into chunks of chunk
// that one pass could not issue in reasonable time: an *OptionError
// naming ChunkElems and Elems.
func CheckChunks(elems, chunk int, sim bool) error {
	if chunk < 1 {
		return optionErr("{ChunkElems} %d: must be positive", chunk)
	}
	chunks := (int64(elems) + int64(chunk) - 1) / int64(chunk)
	switch {
	case sim && chunks > MaxSimChunks:
		return optionErr("{ChunkElems} %d cuts {Elems} %d into %d chunks; the simulator takes at most %d (about 0.1 ms of CPU each): use a larger {ChunkElems}", chunk, elems, chunks, MaxSimChunks)
	case !sim && chunks > MaxGPUChunks:
		return optionErr("{ChunkElems} %d cuts {Elems} %d into %d chunks; a run takes at most %d (several driver calls each): use a larger {ChunkElems}", chunk, elems, chunks, MaxGPUChunks)
	}
	return nil
}
