package sim

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"sort"
	"time"

	"github.com/purecuda/overlap/pipeline"
)

// Profile is what the simulator knows about one GPU and its host: how long
// each operation takes. It is a small JSON file; `overlap profile` measures
// one on a real GPU, and [BuiltinProfile] is the one measured on an H200.
//
// Copies take Fixed + bytes / rate on their direction's copy engine; when
// both directions move at once they share BothGBps, and a copy that
// starts while the other direction's engine is held (by a copy in its
// fixed or its data part) pays BothFixedNs more. A kernel takes its
// fixed cost (launch and tail, which overlaps other kernels) plus its
// per-element work, which kernels in flight on one device share. A wait
// for another stream's event holds its stream for WaitNs, and reaches it
// DepNs after the work before the event ends. The host pays IssueNs for
// every driver call it makes (by the state of its stream and event,
// scaled by IssueScale), SyncNs to wake from a synchronisation, Staging
// for its copies into and out of pinned slots (StagingDMA of that rate
// while DMA copies run) and RegisterMsPerGiB to page-lock memory.
type Profile struct {
	// Version is the profile's format, ProfileVersion for every profile
	// that this package reads or writes. A file without one is of the
	// first format, which is today's: ReadProfile and ParseProfile upgrade
	// it, and refuse a version newer than ProfileVersion.
	Version int `json:"version,omitempty"`
	// Device names the GPU the profile describes.
	Device string `json:"device"`
	// Source says how and when the profile was measured: the command, the
	// date, the driver.
	Source string `json:"source"`

	// H2D and D2H are pinned copies in each direction, alone.
	H2D CopyCost `json:"h2d"`
	D2H CopyCost `json:"d2h"`
	// H2DRegistered and D2HRegistered are the same copies from and to
	// registered Go memory (Pipeline's HostRegistered), whose pages the
	// DMA reaches through the driver's mapping of the Go heap rather than
	// memory the driver allocated. Zero (not measured): registered copies
	// cost pinned ones.
	H2DRegistered CopyCost `json:"h2d_registered,omitempty"`
	D2HRegistered CopyCost `json:"d2h_registered,omitempty"`
	// BothGBps is the rate of both directions at once, in total.
	BothGBps float64 `json:"both_gbps"`
	// BothFixedNs is what a copy's fixed cost grows by when it starts
	// while the other direction's copy engine is held: a cost per copy, not
	// a rate, since the excess is the same at every size measured
	// (bench/RESULTS.md, "The simulator's predictions, sixth round: copies
	// both ways at once"). `overlap profile` times copies both ways at once
	// behind a blocker and solves for it from the simulator's times at two
	// values and a secant step. Zero: not measured, no such cost.
	BothFixedNs float64 `json:"both_fixed_ns,omitempty"`
	// CopyEngines is how many copies run at once in each direction.
	CopyEngines int `json:"copy_engines"`
	// WaitNs is the device time that a stream spends on a wait for an
	// event recorded on another stream, even one already complete: the
	// stream's front end stops at the semaphore, so the next operation's
	// launch is no longer pipelined behind the previous one. `overlap
	// profile` measures it on a stream held busy by a long kernel, as the
	// difference per call between tiny kernels with such a wait before
	// each and tiny kernels alone. Zero: not measured, waits cost the
	// device nothing.
	WaitNs float64 `json:"wait_ns,omitempty"`
	// DepNs is the device's latency of a dependency between streams: a
	// stream held by a wait for an event recorded on another stream goes
	// on DepNs after the work before the event ends (the engine signals
	// its semaphore, the waiting stream's channel sees it and its next
	// operation starts, none of which is pipelined as it is within one
	// stream). `overlap profile` measures it as a chain of dependent
	// copies and kernels that hop between three streams, timed on the
	// device, less the simulator's time for the same chain without it, per
	// hop, plus WaitNs (which that simulated time already charges at each
	// hop, and DepNs overlaps); the built-in profile's DepNs was solved
	// without WaitNs, and is WaitNs short. Zero: not measured, no latency.
	DepNs float64 `json:"dep_ns,omitempty"`
	// PageableH2DGBps and PageableD2HGBps are the blocking copies from and
	// to pageable memory that the synchronous baseline uses.
	PageableH2DGBps float64 `json:"pageable_h2d_gbps"`
	PageableD2HGBps float64 `json:"pageable_d2h_gbps"`

	// Kernels holds each embedded kernel's cost, by Kernel.Name, and a
	// step's by Step.Name. A kernel or step it has no entry for is
	// charged each part of the cost at the most expensive of these
	// entries (the largest FixedNs, NsPerElem and NsPerElemPerIter, the
	// largest NsPerFlop or, where none has one, FallbackNsPerFlop), so
	// that it is not predicted faster than any kernel measured; the
	// run's Report.Notes says so.
	Kernels map[string]KernelCost `json:"kernels"`

	// IssueNs is the host's cost per driver call, by kind: "copy",
	// "launch", "record", "wait", each measured in a loop of calls of that
	// kind alone on an idle stream, and "copy_registered", a copy from
	// registered rather than pinned host memory (without it a copy from
	// registered memory costs a "copy"). The driver's work for a call depends on the state of its
	// stream and event, so the same calls are also measured on a stream
	// that has unfinished work queued ("copy_busy", "launch_busy",
	// "record_busy", "wait_busy": a wait for a completed event) and as
	// waits for an event that is still pending ("wait_pending"). The
	// simulator charges each call by the state of its stream and event in
	// virtual time when it is issued; a kind a profile lacks costs what
	// its idle kind costs.
	IssueNs map[string]float64 `json:"issue_ns"`
	// IssueSequenceNs is the host's time to issue one chunk's calls in a
	// steady loop, as the engine issues them for one input and one output
	// in pinned memory on three streams: 4 waits, 2 copies, a launch and 3
	// records. Calls in that mix may cost the host more or less than the
	// same calls of one kind in a row; the simulator scales every call's
	// IssueNs by IssueSequenceNs over the sum of those 10 calls' IssueNs.
	// Zero: not measured, no scaling.
	IssueSequenceNs float64 `json:"issue_sequence_ns,omitempty"`
	// IssueLoops are the engine's issue loop with a tiny kernel (so that
	// the host sets the pace), timed per chunk on the host for a few
	// shapes, beside what the simulator predicts for the same loop from
	// the per-call costs above. IssueScale is their total measured time
	// over their total predicted time: the simulator scales every call by
	// it, in place of the IssueSequenceNs scaling, when set.
	IssueLoops []IssueLoop `json:"issue_loops,omitempty"`
	IssueScale float64     `json:"issue_scale,omitempty"`
	// SyncNs is the host's cost to return from a synchronisation whose
	// work is done.
	SyncNs float64 `json:"sync_ns"`
	// RunNs is the host's fixed cost of one Pipeline.Run besides its driver
	// calls: checks, goroutines, bookkeeping.
	RunNs float64 `json:"run_ns"`
	// Staging is the host's copy rate into or out of pinned memory by
	// the size of one copy (as Backend.StageIn and StageOut make it, with
	// as many threads as they use for that size): alone, and in total for
	// two at once (one in, one out, as a staged pipeline runs them).
	// Rates between two sizes are interpolated on a log scale.
	Staging []StagingRate `json:"staging"`
	// StagingDMA is the share of their rate that staging copies keep while
	// the device's DMA copies move data both ways: both use the host's
	// memory bandwidth, and a staged run makes six passes over host memory
	// per byte (staging in reads and writes, the H2D reads, the D2H
	// writes, staging out reads and writes). `overlap profile` measures
	// two staging copies at once (4 MiB each) with and without copies in
	// both directions on the device. Zero: not measured, staging keeps its
	// whole rate.
	StagingDMA float64 `json:"staging_dma,omitempty"`
	// StagingDMABySize is StagingDMA measured at several copy sizes, by
	// which DMA runs (H2D alone, D2H alone, both ways): in a staged run the
	// stage-in of one chunk often runs while only an H2D copy does, and a
	// large chunk's slots no longer fit the host's caches, so the DMA takes
	// more of the memory bandwidth. Shares between two sizes are
	// interpolated on a log scale. Without it, StagingDMA applies whenever
	// any DMA copy is in flight.
	StagingDMABySize []StagingDMAShare `json:"staging_dma_by_size,omitempty"`
	// StagingInRun is the rate of each staging copy inside a staged run of
	// the engine, by copy size and direction, while the run's other
	// staging goroutine copies too: `overlap profile` times the stage-in
	// and stage-out spans of staged runs of its own. A run copies from Go
	// memory too large for the host's caches into a few pinned slots that
	// its DMA copies read and write between two uses; neither copies over
	// fresh memory (Staging) nor copies into reused slots without DMA
	// predict such a run (bench/RESULTS.md, "The simulator's predictions,
	// fifth round: validation in rounds, staging timed in staged runs"). When
	// set, a run's staging goroutines copy at this rate while another
	// staging copy runs (shared further when more than two do, as a
	// group's devices make), and faster by Staging's ratio of one copy
	// alone to each of two at once while none does, as the profile
	// reckons its spans; copies timed alone (StageTimes) or made outside a
	// run keep Staging's rates. Rates between two sizes are interpolated on
	// a log scale. Without it, a run's staging copies take Staging's rates.
	StagingInRun []StagingInRun `json:"staging_in_run,omitempty"`
	// StagingChunkNs is a run's staging goroutines' time per chunk besides
	// their copies (their waits, synchronisations and handoffs), which
	// their copies alone do not account for in a staged run whose pace
	// they set (bench/RESULTS.md, "The simulator's predictions, fifth
	// round: validation in rounds, staging timed in staged runs").
	// `overlap profile` times such a run, with more slots than --validate
	// uses, against the simulator's prediction of it at two values.
	// Zero: not measured, no such cost.
	StagingChunkNs float64 `json:"staging_chunk_ns,omitempty"`
	// KernelFixedSerial is the share of a kernel's fixed cost that does not
	// overlap other kernels on other streams: the simulator lets the rest
	// of it (launch and tail) overlap them, and runs this share with the
	// kernel's work, which has the SMs to itself. `overlap profile` times
	// small seed kernels spread over four streams and interpolates between
	// the simulator's times at 0 and 1. Zero: not measured, the whole fixed
	// cost overlaps.
	KernelFixedSerial float64 `json:"kernel_fixed_serial,omitempty"`
	// RegisterMsPerGiB is the cost of page-locking Go memory.
	RegisterMsPerGiB float64 `json:"register_ms_per_gib"`
	// DeviceMemoryBytes is the device's memory: the simulator fails an
	// allocation beyond it as out of memory, and reports what is left as
	// the device's free memory. Zero: DefaultDeviceMemoryBytes.
	DeviceMemoryBytes int64 `json:"device_memory_bytes,omitempty"`

	// Notes says where each number came from.
	Notes map[string]string `json:"notes,omitempty"`
}

// IssueLoop is the host's time per chunk of the engine's issue loop with
// Slots slots and Streams compute streams: measured, and as the simulator
// predicts it from the profile's per-call costs (before IssueScale).
type IssueLoop struct {
	Slots   int `json:"slots"`
	Streams int `json:"streams"`
	// Inputs is the number of H2D copies per chunk (0 in older profiles:
	// one). Only the one-input loops set IssueScale; a loop with two, as
	// saxpy's, shows whether the scale holds for a chunk with more copies.
	Inputs      int     `json:"inputs,omitempty"`
	Ns          float64 `json:"ns"`
	PredictedNs float64 `json:"predicted_ns"`
}

// CopyCost is one direction of pinned copies: a fixed cost per copy and a
// rate.
type CopyCost struct {
	FixedNs float64 `json:"fixed_ns"`
	GBps    float64 `json:"gbps"`
}

// KernelCost is a kernel's time on a chunk of n elements alone on the
// device: FixedNs + n·(NsPerElem + Iters·NsPerElemPerIter +
// FlopsPerElem·NsPerFlop), where Iters is Kernel.Iters (the seed kernel's
// loop count; 0 for other kernels and for steps) and FlopsPerElem is
// Step.FlopsPerElem (0 for a kernel without steps). The entry of a step is
// the one of its Step.Name.
type KernelCost struct {
	FixedNs          float64 `json:"fixed_ns"`
	NsPerElem        float64 `json:"ns_per_elem"`
	NsPerElemPerIter float64 `json:"ns_per_elem_per_iter,omitempty"`
	NsPerFlop        float64 `json:"ns_per_flop,omitempty"`
}

// DefaultDeviceMemoryBytes is the device memory of a profile without
// DeviceMemoryBytes: an H200's 141 GiB.
const DefaultDeviceMemoryBytes int64 = 141 << 30

// FallbackNsPerFlop is the FLOP rate that the simulator charges a kernel
// or step its profile has no cost for, when no kernel of the profile has
// NsPerFlop either: an H200's FP32 peak without tensor cores, 67 TFLOP/s,
// so that such a launch's time is a floor.
const FallbackNsPerFlop = 1 / 67e3

// StagingRate is the host's staging copy rate for copies of Bytes bytes:
// one alone, and two at once in total.
type StagingRate struct {
	Bytes    int     `json:"bytes"`
	GBps     float64 `json:"gbps"`
	PairGBps float64 `json:"pair_gbps"`
}

// StagingDMAShare is the share of their rate that two staging copies of
// Bytes each (one in, one out) keep while the device copies only host to
// device, only device to host, or both ways at once.
type StagingDMAShare struct {
	Bytes int     `json:"bytes"`
	H2D   float64 `json:"h2d"`
	D2H   float64 `json:"d2h"`
	Both  float64 `json:"both"`
}

// StagingInRun is the rate of one staging copy of Bytes bytes inside a
// staged run: into pinned memory (In, as the stage-in goroutine copies)
// and out of it (Out).
type StagingInRun struct {
	Bytes   int     `json:"bytes"`
	InGBps  float64 `json:"in_gbps"`
	OutGBps float64 `json:"out_gbps"`
	// AloneBoost is how much faster such a copy runs while the run's
	// other staging goroutine does not copy, fitted to the same runs'
	// spans. Profiles from before it was measured lack it (0): the
	// Staging table's ratio of one copy alone to each of two at once
	// stands in, measured over fresh pinned memory with nothing else
	// running (1.5–2.2 at 16 and 64 MiB on the H200 host). Fitted in
	// staged runs it came out at 1.0–1.95 (bench/RESULTS.md).
	AloneBoost float64 `json:"alone_boost,omitempty"`
	// IssueLagNs is how late, on average, the engine's issuing goroutine
	// issues the copy that a staging goroutine's handoff let it issue, in
	// a staged run whose staging copies are of Bytes bytes, beyond what
	// the simulator's issue costs account for: woken from its wait, it
	// needs a CPU while the run's copy goroutines hold them. On the H200
	// host it grew with the copy size, from tens of microseconds at 4 MiB
	// to hundreds at 64 MiB (bench/RESULTS.md, "The issuer's lateness by
	// chunk size"). A staging goroutine's handoff carries it, by the
	// size of that goroutine's last copy, and a non-staging goroutine
	// that joins the handoff goes no earlier than the handoff plus it.
	// Zero: none, as in profiles from before it was measured.
	IssueLagNs float64 `json:"issue_lag_ns,omitempty"`
}

// maxIssueLagNs bounds StagingInRun's IssueLagNs: the lags measured on the
// H200 host are hundreds of microseconds at most, and a lag beyond a
// second is a damaged profile, whose virtual times would otherwise run
// past what a time.Duration holds.
const maxIssueLagNs = 1e9

//go:embed profiles/h200.json
var builtinH200 []byte

// BuiltinProfile returns the profile of an NVIDIA H200 that ships with the
// simulator; its Source says how it was measured.
func BuiltinProfile() *Profile {
	p, err := ParseProfile(builtinH200)
	if err != nil {
		panic("pipeline: the built-in profile does not parse: " + err.Error())
	}
	return p
}

// ReadProfile reads a profile from a JSON file.
func ReadProfile(path string) (*Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline: profile: %w", err)
	}
	defer f.Close()
	var b []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		b = append(b, buf[:n]...)
		if len(b) > 1<<20 {
			return nil, fmt.Errorf("pipeline: profile %s: larger than 1 MiB", path)
		}
		if err != nil {
			break
		}
	}
	p, err := ParseProfile(b)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return p, nil
}

// ProfileVersion is the format of the profiles that this package reads
// and writes (Profile.Version).
const ProfileVersion = 1

// ParseProfile reads a profile from JSON, upgrades one of an older format
// (Profile.Version) to ProfileVersion and checks it.
func ParseProfile(b []byte) (*Profile, error) {
	var p Profile
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("pipeline: profile: %w", err)
	}
	if err := p.upgrade(); err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &p, nil
}

// upgrade brings a profile read from a file to ProfileVersion. A file
// without a version is of the first format, which is today's.
func (p *Profile) upgrade() error {
	switch {
	case p.Version == 0:
		p.Version = ProfileVersion
	case p.Version < 0 || p.Version > ProfileVersion:
		return fmt.Errorf("pipeline: profile: version %d, but this simulator reads versions up to %d", p.Version, ProfileVersion)
	}
	return nil
}

// Check reports the first number that a simulation cannot use.
func (p *Profile) Check() error {
	if p == nil {
		return errNilProfile
	}
	pos := func(what string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("pipeline: profile: %s is %v; it must be positive", what, v)
		}
		return nil
	}
	nonNeg := func(what string, v float64) error {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("pipeline: profile: %s is %v; it must not be negative", what, v)
		}
		return nil
	}
	errs := []error{
		pos("h2d.gbps", p.H2D.GBps), pos("d2h.gbps", p.D2H.GBps), pos("both_gbps", p.BothGBps),
		pos("pageable_h2d_gbps", p.PageableH2DGBps), pos("pageable_d2h_gbps", p.PageableD2HGBps),
		nonNeg("h2d.fixed_ns", p.H2D.FixedNs), nonNeg("d2h.fixed_ns", p.D2H.FixedNs),
		nonNeg("h2d_registered.fixed_ns", p.H2DRegistered.FixedNs), nonNeg("d2h_registered.fixed_ns", p.D2HRegistered.FixedNs),
		nonNeg("h2d_registered.gbps", p.H2DRegistered.GBps), nonNeg("d2h_registered.gbps", p.D2HRegistered.GBps),
		nonNeg("device_memory_bytes", float64(p.DeviceMemoryBytes)),
		nonNeg("sync_ns", p.SyncNs), nonNeg("wait_ns", p.WaitNs), nonNeg("dep_ns", p.DepNs), nonNeg("staging_dma", p.StagingDMA), nonNeg("issue_scale", p.IssueScale), nonNeg("issue_sequence_ns", p.IssueSequenceNs), nonNeg("run_ns", p.RunNs), nonNeg("staging_chunk_ns", p.StagingChunkNs), nonNeg("both_fixed_ns", p.BothFixedNs), nonNeg("register_ms_per_gib", p.RegisterMsPerGiB),
	}
	if !(p.KernelFixedSerial >= 0 && p.KernelFixedSerial <= 1) {
		errs = append(errs, fmt.Errorf("pipeline: profile: kernel_fixed_serial is %v; want 0 to 1", p.KernelFixedSerial))
	}
	if p.CopyEngines < 1 {
		errs = append(errs, fmt.Errorf("pipeline: profile: copy_engines is %d; at least 1", p.CopyEngines))
	}
	if len(p.Staging) == 0 {
		errs = append(errs, errors.New("pipeline: profile: staging is empty"))
	}
	for _, r := range p.Staging {
		if r.Bytes < 1 {
			errs = append(errs, fmt.Errorf("pipeline: profile: staging has a size of %d bytes", r.Bytes))
		}
		errs = append(errs, pos(fmt.Sprintf("staging gbps at %d bytes", r.Bytes), r.GBps),
			pos(fmt.Sprintf("staging pair_gbps at %d bytes", r.Bytes), r.PairGBps))
	}
	for _, r := range p.StagingDMABySize {
		if r.Bytes < 1 {
			errs = append(errs, fmt.Errorf("pipeline: profile: staging_dma_by_size has a size of %d bytes", r.Bytes))
		}
		for _, v := range []struct {
			what  string
			share float64
		}{{"h2d", r.H2D}, {"d2h", r.D2H}, {"both", r.Both}} {
			if !(v.share > 0 && v.share <= 1) {
				errs = append(errs, fmt.Errorf("pipeline: profile: staging_dma_by_size %s at %d bytes is %v; it must be above 0 and at most 1", v.what, r.Bytes, v.share))
			}
		}
	}
	for _, r := range p.StagingInRun {
		if r.Bytes < 1 {
			errs = append(errs, fmt.Errorf("pipeline: profile: staging_in_run has a size of %d bytes", r.Bytes))
		}
		errs = append(errs, pos(fmt.Sprintf("staging_in_run in_gbps at %d bytes", r.Bytes), r.InGBps),
			pos(fmt.Sprintf("staging_in_run out_gbps at %d bytes", r.Bytes), r.OutGBps),
			nonNeg(fmt.Sprintf("staging_in_run alone_boost at %d bytes", r.Bytes), r.AloneBoost),
			nonNeg(fmt.Sprintf("staging_in_run issue_lag_ns at %d bytes", r.Bytes), r.IssueLagNs))
		if r.IssueLagNs > maxIssueLagNs {
			errs = append(errs, fmt.Errorf("pipeline: profile: staging_in_run issue_lag_ns at %d bytes is %v; at most %v (1 s)", r.Bytes, r.IssueLagNs, float64(maxIssueLagNs)))
		}
	}
	for _, kind := range issueKinds {
		errs = append(errs, nonNeg("issue_ns."+kind, p.IssueNs[kind]))
	}
	names := make([]string, 0, len(p.Kernels))
	for n := range p.Kernels {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := p.Kernels[n]
		errs = append(errs, nonNeg("kernels."+n+".fixed_ns", k.FixedNs), nonNeg("kernels."+n+".ns_per_elem", k.NsPerElem),
			nonNeg("kernels."+n+".ns_per_elem_per_iter", k.NsPerElemPerIter), nonNeg("kernels."+n+".ns_per_flop", k.NsPerFlop))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

var issueKinds = []string{"copy", "copy_registered", "launch", "record", "wait",
	"copy_busy", "copy_registered_busy", "launch_busy", "record_busy", "wait_busy", "wait_pending"}

// issueSequence is the calls of one chunk that Profile.IssueSequenceNs
// times, by kind.
var issueSequence = map[string]int{"wait": 4, "copy": 2, "launch": 1, "record": 3}

// IssueSequence returns, in a map of its own, how many of each kind of
// call one chunk of the issue loop makes (the calls that
// Profile.IssueSequenceNs times): the caller may change it.
func IssueSequence() map[string]int { return maps.Clone(issueSequence) }

// issueCost is the host's cost of a driver call of kind in a run when its
// stream has unfinished work (busy) and, for a wait, when its event is
// still pending: the cost the profile measured in that state, or in the
// nearest state it measured, scaled to the steady mix of a run's calls.
func (p *Profile) issueCost(kind string, busy, pending bool) time.Duration {
	return time.Duration(p.issueNs(kind, busy, pending) * p.issueScale())
}

// issueNs is issueCost before scaling.
func (p *Profile) issueNs(kind string, busy, pending bool) float64 {
	var try []string
	if pending {
		try = append(try, kind+"_pending")
	}
	if busy || pending {
		try = append(try, kind+"_busy")
	}
	try = append(try, kind)
	if kind == "copy_registered" {
		// Older profiles lack copies from registered memory.
		try = append(try, p.registeredFallback(busy)...)
	}
	for _, k := range try {
		if c, ok := p.IssueNs[k]; ok {
			return c
		}
	}
	return 0
}

// registeredFallback lists the kinds that price a copy from registered
// memory when the profile did not measure it: a copy from pinned memory,
// with the registered copy's state.
func (p *Profile) registeredFallback(busy bool) []string {
	if busy {
		return []string{"copy_busy", "copy"}
	}
	return []string{"copy"}
}

// issueScale is IssueScale, or for profiles from before it was measured
// IssueSequenceNs over the sum of IssueNs for the same calls, or 1.
func (p *Profile) issueScale() float64 {
	if p.IssueScale > 0 {
		return p.IssueScale
	}
	var sum float64
	for kind, n := range issueSequence {
		sum += float64(n) * p.IssueNs[kind]
	}
	if p.IssueSequenceNs <= 0 || sum <= 0 {
		return 1
	}
	return p.IssueSequenceNs / sum
}

// Write writes the profile as indented JSON, of version ProfileVersion
// when it has none.
func (p *Profile) Write(path string) error {
	if p == nil {
		return errNilProfile
	}
	q := *p
	if q.Version == 0 {
		q.Version = ProfileVersion
	}
	b, err := json.MarshalIndent(&q, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

var errNilProfile = errors.New("pipeline: profile: nil *Profile")

// Clone returns a deep copy; nil for a nil Profile.
func (p *Profile) Clone() *Profile {
	if p == nil {
		return nil
	}
	q := *p
	q.Kernels = map[string]KernelCost{}
	for k, v := range p.Kernels {
		q.Kernels[k] = v
	}
	q.IssueNs = map[string]float64{}
	for k, v := range p.IssueNs {
		q.IssueNs[k] = v
	}
	q.Notes = map[string]string{}
	for k, v := range p.Notes {
		q.Notes[k] = v
	}
	q.Staging = append([]StagingRate(nil), p.Staging...)
	q.IssueLoops = append([]IssueLoop(nil), p.IssueLoops...)
	q.StagingDMABySize = append([]StagingDMAShare(nil), p.StagingDMABySize...)
	q.StagingInRun = append([]StagingInRun(nil), p.StagingInRun...)
	return &q
}

// copyCost is the cost of a copy towards the device when toDevice, from
// or to registered memory when registered.
func (p *Profile) copyCost(toDevice, registered bool) CopyCost {
	switch {
	case toDevice && registered && p.H2DRegistered.GBps > 0:
		return p.H2DRegistered
	case toDevice:
		return p.H2D
	case registered && p.D2HRegistered.GBps > 0:
		return p.D2HRegistered
	}
	return p.D2H
}

// kernel returns the cost of k on n elements alone, for a kernel without
// steps: its fixed part and its work (see launchCost).
func (p *Profile) kernel(k *pipeline.Kernel, n int) (fixed, work time.Duration, err error) {
	fixed, work, _, err = p.launchCost(k.Name, k.Iters, 0, n)
	return fixed, work, err
}

// launchCost returns the cost of a launch of the kernel or step named name
// on n elements alone, with iters iterations and flops FLOPs per element:
// its fixed part and its work, from the profile's entry of that name
// (KernelCost). A name the profile does not have (a user's kernel, a
// model's layer) is charged the fallback cost (fallbackCost), and note
// says so; a profile without kernels is an error.
func (p *Profile) launchCost(name string, iters int, flops float64, n int) (fixed, work time.Duration, note string, err error) {
	c, ok := p.Kernels[name]
	if !ok {
		if len(p.Kernels) == 0 {
			return 0, 0, "", fmt.Errorf("sim: the profile of %s has no kernel costs", p.Device)
		}
		c = p.fallbackCost()
		note = p.fallbackNote(name)
	}
	per := c.NsPerElem + float64(iters)*c.NsPerElemPerIter + flops*c.NsPerFlop
	return time.Duration(c.FixedNs), time.Duration(per * float64(n)), note, nil
}

// fallbackCost is what a kernel or step that the profile has no entry for
// costs: each part of the cost at the profile's most expensive kernel for
// it (the largest fixed cost, the largest cost per element and per
// iteration, the slowest FLOP rate), and where no kernel has a FLOP rate,
// FallbackNsPerFlop. It is meant to be pessimistic for a kernel like
// overlap's, so that an unknown kernel is not predicted faster than any
// the profile measured, and the FLOP rate makes a model's layers cost
// their arithmetic; it is still a guess, and the report says so
// (Report.Notes).
func (p *Profile) fallbackCost() KernelCost {
	var c KernelCost
	for _, k := range p.Kernels {
		c.FixedNs = max(c.FixedNs, k.FixedNs)
		c.NsPerElem = max(c.NsPerElem, k.NsPerElem)
		c.NsPerElemPerIter = max(c.NsPerElemPerIter, k.NsPerElemPerIter)
		c.NsPerFlop = max(c.NsPerFlop, k.NsPerFlop)
	}
	if c.NsPerFlop == 0 {
		c.NsPerFlop = FallbackNsPerFlop
	}
	return c
}

// fallbackNote says that name was charged the fallback cost.
func (p *Profile) fallbackNote(name string) string {
	c := p.fallbackCost()
	return fmt.Sprintf("simulator: the profile of %s has no cost for kernel %q; it was charged the profile's most expensive: %.0f ns + %.3g ns per element (+ %.3g per iteration) + %.3g ns per FLOP (%.3g TFLOP/s)",
		p.Device, name, c.FixedNs, c.NsPerElem, c.NsPerElemPerIter, c.NsPerFlop, 1e-3/c.NsPerFlop)
}

// deviceMemory is DeviceMemoryBytes, or DefaultDeviceMemoryBytes without it.
func (p *Profile) deviceMemory() int64 {
	if p.DeviceMemoryBytes > 0 {
		return p.DeviceMemoryBytes
	}
	return DefaultDeviceMemoryBytes
}

// bySize is the value that val gives a table measured at several sizes,
// for size n: exact at a size measured, interpolated on a log scale of
// size between two, and the nearest entry's outside them.
func bySize[T any](rows []T, size func(T) int, val func(T) float64, n int) float64 {
	rs := append([]T(nil), rows...)
	sort.Slice(rs, func(i, j int) bool { return size(rs[i]) < size(rs[j]) })
	if n <= size(rs[0]) {
		return val(rs[0])
	}
	for i := 1; i < len(rs); i++ {
		if n <= size(rs[i]) {
			a, b := rs[i-1], rs[i]
			f := math.Log(float64(n)/float64(size(a))) / math.Log(float64(size(b))/float64(size(a)))
			return val(a) + f*(val(b)-val(a))
		}
	}
	return val(rs[len(rs)-1])
}

// stagingDMA returns the share of their rate that staging copies of n
// bytes keep while DMA copies run host to device (h2d), device to host
// (d2h), or both; 1 while none runs.
func (p *Profile) stagingDMA(n int, h2d, d2h bool) float64 {
	if !h2d && !d2h {
		return 1
	}
	if len(p.StagingDMABySize) == 0 {
		if p.StagingDMA > 0 {
			return p.StagingDMA
		}
		return 1
	}
	return bySize(p.StagingDMABySize, func(r StagingDMAShare) int { return r.Bytes }, func(r StagingDMAShare) float64 {
		switch {
		case h2d && d2h:
			return r.Both
		case h2d:
			return r.H2D
		}
		return r.D2H
	}, n)
}

// stagingInRun is StagingInRun's rate, in bytes per nanosecond, for a
// copy of n bytes into pinned memory (in) or out of it; 0 without it.
func (p *Profile) stagingInRun(n int, in bool) float64 {
	if len(p.StagingInRun) == 0 {
		return 0
	}
	return bySize(p.StagingInRun, func(r StagingInRun) int { return r.Bytes }, func(r StagingInRun) float64 {
		if in {
			return r.InGBps
		}
		return r.OutGBps
	}, n)
}

// stagingIssueLag is StagingInRun's issue lag for staging copies of n
// bytes; 0 without it.
func (p *Profile) stagingIssueLag(n int) time.Duration {
	if p == nil || len(p.StagingInRun) == 0 {
		return 0
	}
	return time.Duration(bySize(p.StagingInRun, func(r StagingInRun) int { return r.Bytes }, func(r StagingInRun) float64 { return r.IssueLagNs }, n))
}

// StagingAloneBoost is how much faster a staging copy of n bytes in a
// staged run goes while the run's other staging goroutine does not copy:
// the speed-up that the simulator gives StagingInRun's rates, which hold
// while both copy. It is StagingInRun's AloneBoost where measured, else
// StagingTableBoost.
func (p *Profile) StagingAloneBoost(n int) float64 {
	if p == nil {
		return 1
	}
	if len(p.StagingInRun) > 0 && p.StagingInRun[0].AloneBoost > 0 {
		return bySize(p.StagingInRun, func(r StagingInRun) int { return r.Bytes }, func(r StagingInRun) float64 { return max(1, r.AloneBoost) }, n)
	}
	return p.StagingTableBoost(n)
}

// StagingTableBoost is how much faster a staging copy of n bytes runs
// alone than each of two at once, by the Staging table (at least 1, and 1
// without one).
func (p *Profile) StagingTableBoost(n int) float64 {
	if p == nil || len(p.Staging) == 0 {
		return 1
	}
	alone, pair := p.stagingRate(n)
	if pair <= 0 {
		return 1
	}
	return max(1, 2*alone/pair)
}

// stagingRate is the host's staging rate in bytes per nanosecond for
// copies of n bytes: alone, and in total for two at once.
func (p *Profile) stagingRate(n int) (alone, pair float64) {
	size := func(r StagingRate) int { return r.Bytes }
	return bySize(p.Staging, size, func(r StagingRate) float64 { return r.GBps }, n),
		bySize(p.Staging, size, func(r StagingRate) float64 { return r.PairGBps }, n)
}

// KernelTime is what the simulator charges one launch of k over n
// elements on an idle device with this profile: a fixed cost and the
// work, which kernels in flight at once share. It fails for a kernel the
// profile cannot cost (no entry and no fallback).
func (p *Profile) KernelTime(k *pipeline.Kernel, n int) (fixed, work time.Duration, err error) {
	if p == nil {
		return 0, 0, errNilProfile
	}
	if k == nil {
		return 0, 0, errors.New("pipeline: profile: KernelTime: nil *pipeline.Kernel")
	}
	return p.kernel(k, n)
}

// LaunchTime is KernelTime for a launch by name, with iters iterations
// and flops FLOPs per element (a step's Name, Kernel.Iters and
// Step.FlopsPerElem), and the note that a report carries when the
// profile has no entry of that name and charges its fallback.
func (p *Profile) LaunchTime(name string, iters int, flops float64, n int) (fixed, work time.Duration, note string, err error) {
	if p == nil {
		return 0, 0, "", errNilProfile
	}
	return p.launchCost(name, iters, flops, n)
}

// StagingRates is the host's staging copy rate for copies of n bytes, in
// bytes per nanosecond: alone, and in all of two such copies at once; 0
// for a profile without Staging.
func (p *Profile) StagingRates(n int) (alone, pair float64) {
	if p == nil || len(p.Staging) == 0 {
		return 0, 0
	}
	return p.stagingRate(n)
}
