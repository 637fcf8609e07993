// Command overlap runs and measures overlapped H2D → compute → D2H
// pipelines on NVIDIA GPUs, with no cgo and no CUDA toolkit.
//
// Usage:
//
//	overlap run [flags]        the lecture's experiment: synchronous baseline, then the pipeline
//	overlap stream --in F --out G  stream files through a kernel with bounded memory
//	overlap infer --model M    run a PyTorch MLP (safetensors) over rows: in memory or streamed
//	overlap gen --size N --out F  write an input file of the standard pattern
//	overlap bench [flags]      sweep configurations, optionally against CUDA C++
//	overlap bench small-jobs   many small jobs from several goroutines
//	overlap bench scaling      the job over 1 to k GPUs
//	overlap tune [flags]       pick chunk size, slots and streams from a fitted cost model
//	overlap profile [flags]    measure a device profile for the simulator, and check its predictions
//	overlap ptx describe FILE  read a PTX file's header, entries and parameters
//	overlap devices            list GPUs, the driver version and library path
//	overlap version            print overlap's version (also --version)
//	overlap help [COMMAND]     show this help, or a command's
//
// Each command prints its usage and flags on -h.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/purecuda/overlap/loader"
)

// exit codes, as Go's flag package uses them.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// commands are overlap's commands, in the order overlap help lists them.
// Each lives beside its flags: run.go, stream.go, infer.go, gen.go,
// bench.go, tune.go, profile.go, ptxcmd.go, devices.go, version.go.
var commands []*command

func init() {
	benchCmd.subs = []*command{smallJobsCmd, scalingCmd}
	benchCmd.moved = []moved{{flag: "small-jobs", to: smallJobsCmd, drop: true}, {flag: "devices", to: scalingCmd}}
	ptxCmd.subs = []*command{ptxDescribeCmd}
	runCmd.related = []*command{streamCmd}
	runCmd.moved = []moved{{flag: "in", to: streamCmd}}
	streamCmd.related = []*command{runCmd}
	commands = []*command{runCmd, streamCmd, inferCmd, genCmd, benchCmd, tuneCmd, profileCmd, ptxCmd, devicesCmd, versionCmd, helpCmd}
	link(commands, nil)
}

var helpCmd = &command{
	name:      "help",
	usageLine: "overlap help [COMMAND]",
	short:     "show this help, or a command's usage and flags",
	aliases:   []string{"-h", "-help", "--help"},
}

func main() {
	limitHeapToAvailable()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// limitHeapToAvailable sets the Go runtime's soft memory limit to 90% of
// the memory the host has available as overlap starts, unless GOMEMLIMIT
// says otherwise: near it the collector works harder instead of letting
// the heap grow to twice what is live (GOGC's default). A simulated run
// of 1G elements, about 16 GB live, grew to 21 GB on a host with 22.7 GB
// available, and swapped: it ended 17 s after its stop signal instead
// of 5 (the trial). The limit is soft: a run that needs more than it
// still gets it, more slowly.
func limitHeapToAvailable() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if avail, ok := availableMemory(); ok && avail > 0 {
		debug.SetMemoryLimit(memoryLimitFor(avail))
	}
}

// memoryLimitFor is the soft memory limit for avail bytes available: 90%
// of it, and never under 1 GiB. In a memory cgroup the page cache that a
// large write left counts as used, except for its inactive part
// (procfs.AvailableMemory), and a limit of 85 MB, after writing a 1.9 GB
// file in a 2 GiB cgroup with all of it counted, had a run of 8M elements
// collect for 0.5 s before anything else (the review); the floor holds
// where the cache is still active.
func memoryLimitFor(avail int64) int64 { return max(avail/10*9, 1<<30) }

// run dispatches a command line and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		var names []string
		for _, c := range commands {
			names = append(names, c.name)
		}
		fmt.Fprintf(stderr, "overlap: missing command: %s (try 'overlap help')\n", oneOf(names))
		return exitUsage
	}
	c := lookup(commands, args[0])
	switch {
	case c == nil:
		fmt.Fprintf(stderr, "overlap: unknown command %q (try 'overlap help')\n", args[0])
		return exitUsage
	case c == helpCmd:
		return help(args[1:], stdout, stderr)
	}
	return c.run(args[1:], stdout, stderr)
}

// help is overlap help: every command, or with a command's name (and a
// subcommand's) that command's help, as its -h prints it.
func help(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stdout, "overlap: overlapped host-to-device copy, compute and device-to-host copy on CUDA streams")
		fmt.Fprintln(stdout, "\nUsage:")
		listCommands(stdout, commands)
		fmt.Fprint(stdout, "\nEach command prints its usage and flags with 'overlap COMMAND -h' or\n"+
			"'overlap help COMMAND'. Renamed in this release, the old spellings working\n"+
			"until the next: overlap run --in is overlap stream, overlap bench --small-jobs\n"+
			"is overlap bench small-jobs, overlap bench --devices is overlap bench scaling.\n\n"+
			"The NVIDIA driver is found through OVERLAP_CUDA_LIBRARY or the usual places.\n")
		return exitOK
	}
	cs, c := commands, (*command)(nil)
	for i, word := range args {
		next := lookup(cs, word)
		if next == nil {
			what := strings.Join(args[:i+1], " ")
			fmt.Fprintf(stderr, "overlap help: unknown command %q (try 'overlap help')\n", what)
			return exitUsage
		}
		c, cs = next, next.subs
	}
	c.help(stdout)
	return exitOK
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
		msg := err.Error()
		var oe *loader.OptionalError
		if errors.As(err, &oe) {
			// One line: the optional library's every path tried, one a
			// line (38 lines for NVRTC), is for the library's callers.
			msg = strings.Replace(msg, oe.Error(), oe.Brief(), 1)
		}
		fmt.Fprintf(stderr, "overlap %s: %s\n", cmd, msg)
	}
	return exitFail
}

// writeJSON writes v as indented JSON, the form of every --json output.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
