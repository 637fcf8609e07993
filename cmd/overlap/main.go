// Command overlap runs and measures overlapped H2D → compute → D2H
// pipelines on NVIDIA GPUs, with no cgo and no CUDA toolkit.
//
// Usage:
//
//	overlap run [flags]        the lecture's experiment: synchronous baseline, then the pipeline
//	overlap run --in F --out G stream files through a kernel with bounded memory
//	overlap infer --model M    run a PyTorch MLP (safetensors) over rows: in memory or streamed
//	overlap gen --size N --out F  write an input file of the standard pattern
//	overlap bench [flags]      sweep configurations, optionally against CUDA C++
//	overlap tune [flags]       pick chunk size, slots and streams from a fitted cost model
//	overlap profile [flags]    measure a device profile for the simulator, and check its predictions
//	overlap ptx describe FILE  read a PTX file's header, entries and parameters
//	overlap devices            list GPUs, the driver version and library path
//	overlap version            print overlap's version (also --version)
//	overlap help               show this help
//
// Each command prints its usage and flags on -h.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/purecuda/overlap/loader"
)

// exit codes, as Go's flag package uses them.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `overlap: overlapped host-to-device copy, compute and device-to-host copy on CUDA streams

Usage:
  overlap run [flags]  run the synchronous baseline and the overlapped pipeline,
                       verify every element, and print times (overlap run -h)
  overlap run --in FILE[,FILE] --out FILE [flags]
                       stream raw float32 files (- for stdin/stdout) through a
                       kernel with bounded memory (overlap run --in -h)
  overlap infer --model FILE (--rows N | --in FILE --out FILE) [flags]
                       run a PyTorch-trained MLP (a safetensors state_dict)
                       over rows of float32, in memory against a synchronous
                       baseline or streamed with bounded memory (overlap infer -h)
  overlap gen --size BYTES --out FILE
                       write an input file of the standard pattern
  overlap bench [flags] sweep chunk sizes, slots, host modes and intensity;
                       --reference compares with the CUDA C++ pipeline
  overlap tune [flags] fit a cost model to probes, pick chunk, slots and streams,
                       and measure the choice against the prediction
  overlap profile [flags]
                       measure the GPU's device profile for the simulator
                       (--out FILE); --validate compares measured and
                       predicted times over 26 configurations
  overlap ptx describe FILE
                       read a PTX file (no GPU needed): version, target,
                       entries and their parameters
  overlap devices      list the GPUs, the driver version and the library opened
  overlap version      print overlap's version (also overlap --version)
  overlap help         show this help

Each command prints its usage and flags with 'overlap COMMAND -h'.

The NVIDIA driver is found through ` + "OVERLAP_CUDA_LIBRARY" + ` or the usual places.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "overlap: missing command: run, infer, bench, tune, profile, gen, ptx, devices, version or help (try 'overlap help')")
		return exitUsage
	}
	switch args[0] {
	case "devices":
		return cmdDevices(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "bench":
		return cmdBench(args[1:], stdout, stderr)
	case "tune":
		return cmdTune(args[1:], stdout, stderr)
	case "profile":
		return cmdProfile(args[1:], stdout, stderr)
	case "ptx":
		return cmdPTX(args[1:], stdout, stderr)
	case "gen":
		return cmdGen(args[1:], stdout, stderr)
	case "infer":
		return cmdInfer(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return cmdVersion(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "overlap: unknown command %q (try 'overlap help')\n", args[0])
		return exitUsage
	}
}

// usageError marks an error in what the user asked for: exit code 2.
type usageError struct{ error }

// reportError prints a command's failure as one line and returns its exit
// code: 2 for a usage error, 128 + the signal's number for a command that
// a signal stopped (130 for SIGINT, 143 for SIGTERM, as a shell reports
// them), 1 otherwise, with a hint to use --sim when no driver was found.
func reportError(cmd string, err error, stderr io.Writer) int {
	var ue usageError
	var se *signalError
	switch {
	case errors.As(err, &se):
		fmt.Fprintln(stderr, signalLine(cmd, se))
		return se.exitCode()
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "overlap %s: %v\n", cmd, ue.error)
		return exitUsage
	case errors.Is(err, loader.ErrNoDriver):
		fmt.Fprintln(stderr, noDriverLine(err)+"; use --sim to run on the CPU simulator")
	default:
		fmt.Fprintf(stderr, "overlap %s: %v\n", cmd, err)
	}
	return exitFail
}

// flagFailure turns a flag-parsing result into an exit: help is success,
// anything else a one-line usage error. done is false when err is nil.
func flagFailure(cmd string, err error, stderr io.Writer) (code int, done bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return exitOK, true
	default:
		fmt.Fprintf(stderr, "overlap %s: %v\n", cmd, err)
		return exitUsage, true
	}
}

// writeJSON writes v as indented JSON, the form of every --json output.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
