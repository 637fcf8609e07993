package main

import (
	"cmp"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/purecuda/overlap/driver"
)

// machine is what the flags that choose the machine say: the simulator or
// a GPU, which GPUs, the simulator's profile, how the host waits and how
// long the GPU warms up. Every command that runs anything adds the ones
// it takes with addMachineFlags and checks them with check, so that each
// flag means and is checked the same everywhere; openEnv reads the result.
type machine struct {
	sim bool
	// gpu is --gpu: a missing driver is an error, not a run on the
	// simulator (overlap run's fallback).
	gpu    bool
	device int
	// devices are the GPUs of a group (--devices 0,1); nil with
	// allDevices for every GPU, nil without it for --device alone.
	devices    []int
	allDevices bool
	// profile is --profile FILE, the device profile the simulator runs on.
	profile string
	// wait is how the host waits for the GPU (--wait), waits the modes
	// of a command that takes several (--wait all).
	wait  driver.Wait
	waits []driver.Wait
	// warm is the untimed GPU work before each timed part (--warm).
	warm time.Duration
	// noGPU says why a command that asked for no machine runs on the
	// simulator: no driver was found (empty when it runs where asked).
	noGPU string
}

// machineFlag names one of the machine flags.
type machineFlag uint

const (
	flagSim machineFlag = 1 << iota
	flagGPU
	flagDevice
	flagDevices
	flagProfile
	flagWait
	flagWaitAll // --wait, taking all for spin, yield and block
	flagWarm
)

// machineHelp is each machine flag's description; a command may word one
// for itself (addMachineFlags's help).
var machineHelp = map[string]string{
	"sim":     "run on the CPU simulator instead of a GPU (times predicted from a device profile)",
	"gpu":     "run on the GPU only: without a driver, fail rather than run on the simulator",
	"device":  "GPU index",
	"devices": "GPUs that share the job: all, or indexes such as 0,1 (with --sim: how many simulated H200s, as 0,1)",
	"profile": "with --sim: the device profile (JSON from overlap profile) to predict times from (default: the built-in H200 profile)",
	"wait":    "how the host waits for the GPU: spin, yield, block, auto, or default (the driver's as left)",
	"warm":    "untimed GPU work right before each timed part, so that an idle GPU and host reach their clocks; 0 turns it off",
}

// addMachineFlags adds the machine flags of which to fs, writing into m;
// help words a flag for this command. With --devices, m starts on every
// GPU.
func (m *machine) addMachineFlags(fs *flag.FlagSet, which machineFlag, help map[string]string) {
	text := func(name string) string { return cmp.Or(help[name], machineHelp[name]) }
	if which&flagSim != 0 {
		fs.BoolVar(&m.sim, "sim", false, text("sim"))
	}
	if which&flagGPU != 0 {
		fs.BoolVar(&m.gpu, "gpu", false, text("gpu"))
	}
	if which&flagDevice != 0 {
		fs.IntVar(&m.device, "device", 0, text("device"))
	}
	if which&flagDevices != 0 {
		m.allDevices = true
		fs.Func("devices", text("devices"), func(s string) (err error) {
			m.devices, m.allDevices, err = parseDevices(s)
			return err
		})
	}
	if which&flagProfile != 0 {
		fs.StringVar(&m.profile, "profile", "", text("profile"))
	}
	if which&(flagWait|flagWaitAll) != 0 {
		fs.Var(machineWait{m, which&flagWaitAll != 0}, "wait", text("wait"))
	}
	if which&flagWarm != 0 {
		fs.Var(warmFlag{&m.warm}, "warm", text("warm"))
	}
}

// check checks the machine flags that fs parsed, in one place for every
// command. fallback is overlap run's: a command that asks for no machine
// in particular runs on the GPUs, or on the simulator where no driver is
// found; asking for a GPU (--gpu, --device, --devices, or needGPU: what
// only a GPU does, such as --ptx) or for what only a GPU does (--wait,
// --warm) makes a missing driver the error.
func (m *machine) check(fs *flag.FlagSet, fallback, needGPU bool) error {
	if err := refuse([]refusal{
		{m.sim && m.gpu, "--sim and --gpu ask for different machines; give one"},
		{m.profile != "" && !m.sim, "--profile needs --sim: a GPU measures its own times"},
	}); err != nil {
		return err
	}
	if fallback && !m.sim && !m.gpu && !needGPU && firstSet(fs, "device", "devices", "wait", "warm") == "" {
		if why := noGPU(); why != "" {
			m.sim = true
			m.noGPU = why + ": running on the CPU simulator instead (--gpu makes this an error)"
		}
	}
	if m.profile != "" {
		if _, err := statInput("profile", m.profile); err != nil {
			return err
		}
	}
	if err := refuse([]refusal{
		{m.warm > maxWarm, fmt.Sprintf("--warm %v: at most %v (overlap run warms up before each of its --repeat+2 timed parts)", m.warm, maxWarm)},
		{m.sim && m.warm > 0 && isSet(fs, "warm"), "--warm needs a GPU: the simulator's profile describes a warm device"},
		{m.sim && isSet(fs, "wait"), "--wait needs a GPU: the simulator has no host thread waiting on a driver"},
		{m.device < 0, fmt.Sprintf("--device %d: must not be negative", m.device)},
		{m.sim && isSet(fs, "device"), "--device cannot be used with --sim: the simulator is one CPU device"},
		{isSet(fs, "device") && isSet(fs, "devices"), "--device and --devices both choose GPUs; give one"},
	}); err != nil {
		return err
	}
	switch {
	case isSet(fs, "device"):
		m.allDevices = false
	case m.sim && m.allDevices:
		m.devices, m.allDevices = []int{0}, false // one simulated H200 unless --devices lists more
	}
	if m.sim && slices.ContainsFunc(m.devices, func(d int) bool { return d >= maxSimDevices }) {
		list := strings.Trim(strings.ReplaceAll(fmt.Sprint(m.devices), " ", ","), "[]") // [0 9] as --devices took it: 0,9
		return fmt.Errorf("--devices %s: the simulator has at most %d devices, 0 to %d (--devices 0,1 simulates two)", list, maxSimDevices, maxSimDevices-1)
	}
	return nil
}

// warmFlag reads --warm: a duration such as 50ms, or 0.
type warmFlag struct{ v *time.Duration }

func (f warmFlag) String() string {
	if f.v == nil {
		return "0s"
	}
	return f.v.String()
}

func (f warmFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 50ms or 0, not %q", s)
	}
	if d < 0 {
		return fmt.Errorf("want 0 or more, not %v", d)
	}
	*f.v = d
	return nil
}

// machineWait reads --wait into wait and waits; with all, "all" is spin,
// yield and block.
type machineWait struct {
	m   *machine
	all bool
}

func (f machineWait) String() string {
	if f.m == nil {
		return driver.WaitDefault.String()
	}
	if f.all {
		return waitFlag{w: &f.m.waits}.String()
	}
	return f.m.wait.String()
}

func (f machineWait) Set(s string) error {
	if err := (waitFlag{w: &f.m.waits, all: f.all}).Set(s); err != nil {
		return err
	}
	f.m.wait = f.m.waits[0]
	return nil
}

// parseDevices reads "all" or a list of distinct GPU indexes.
func parseDevices(s string) (list []int, all bool, err error) {
	if strings.TrimSpace(s) == "all" {
		return nil, true, nil
	}
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return nil, false, fmt.Errorf("%q is not a GPU index (want all, or indexes such as 0,1)", strings.TrimSpace(f))
		}
		if seen[d] {
			return nil, false, fmt.Errorf("GPU %d is listed twice", d)
		}
		seen[d] = true
		list = append(list, d)
	}
	return list, false, nil
}
