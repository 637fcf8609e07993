package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
)

// noDriverLine is the one line printed when no NVIDIA driver is found: how
// many paths were tried and, for a library that exists but is not a usable
// driver, why.
func noDriverLine(err error) string {
	var oe *loader.OpenError
	if errors.As(err, &oe) {
		return "overlap: " + oe.Brief()
	}
	return "overlap: " + err.Error()
}

// devicesCmd is overlap devices.
var devicesCmd = &command{
	name:      "devices",
	usageLine: "overlap devices",
	short:     "list the GPUs, the driver version and the library opened",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		return func(stdout, stderr io.Writer) int { return runDevices(fs, stdout, stderr) }
	},
}

func runDevices(fs *flag.FlagSet, stdout, stderr io.Writer) int {
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "overlap devices: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if intSize < 64 {
		fmt.Fprintf(stderr, "overlap devices: %v\n", errNo32Bit)
		return exitFail
	}
	if err := driver.Load(); err != nil {
		fmt.Fprintln(stderr, noDriverLine(err))
		return exitFail
	}
	v, _ := driver.DriverVersion()
	fmt.Fprintf(stdout, "driver: CUDA %s, library %s\n", loader.FormatVersion(v), driver.LibraryPath())
	devs, err := bench.DescribeDevices()
	if err != nil {
		fmt.Fprintf(stderr, "overlap: %v\n", benchError(err))
		return exitFail
	}
	bench.WriteDevicesTable(stdout, devs)
	return exitOK
}
