package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/hostcpu"
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
	n, err := driver.DeviceCount()
	if err != nil {
		fmt.Fprintf(stderr, "overlap: %v\n", err)
		return exitFail
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tNAME\tCC\tMEMORY\tSMs\tCOPY ENGINES\tCONCURRENT KERNELS\tPCI BUS\tNUMA\tLOCAL CPUS")
	for i := 0; i < n; i++ {
		d, err := driver.DeviceAt(i)
		if err != nil {
			fmt.Fprintf(stderr, "overlap: %v\n", err)
			return exitFail
		}
		row, err := deviceRow(d)
		if err != nil {
			fmt.Fprintf(stderr, "overlap: GPU %d: %v\n", i, err)
			return exitFail
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	return exitOK
}

func deviceRow(d driver.Device) (string, error) {
	info, err := bench.DescribeDevice(d)
	if err != nil {
		return "", benchError(err)
	}
	numa, cpus := localityColumns(info)
	return fmt.Sprintf("%d\t%s\t%d.%d\t%.1f GiB\t%d\t%d\t%v\t%s\t%s\t%s", info.Ordinal, info.Name, info.Major, info.Minor,
		float64(info.Memory)/(1<<30), info.Multiprocessors, info.CopyEngines, info.ConcurrentKernels, info.PCIBusID, numa, cpus), nil
}

// localityColumns gives a GPU's NUMA node and the CPUs local to it, or "-"
// where the host does not say (no sysfs entry, a system other than Linux,
// a single-node host reporting -1).
func localityColumns(info bench.DeviceInfo) (numa, cpus string) {
	if !info.Located {
		return "-", "-"
	}
	numa = "-"
	if info.NUMANode >= 0 {
		numa = fmt.Sprint(info.NUMANode)
	}
	return numa, hostcpu.FormatCPUList(info.LocalCPUs)
}
