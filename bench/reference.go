package bench

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/ptx/kernels"
)

//go:embed reference/*.cu reference/*.h
var referenceFiles embed.FS

// ErrNoNVCC reports that nvcc is not on PATH, so the reference programs
// cannot be built.
var ErrNoNVCC = errors.New("bench: nvcc not found; the CUDA C++ reference needs the CUDA toolkit")

// Reference is a built set of reference programs.
type Reference struct {
	Dir      string // where the sources and binaries are
	Pipeline string // path of the pipeline binary
	Launch   string // path of the launch/bandwidth binary
	Multi    string // path of the multi-GPU pipeline binary
	// SmallJobs is the path of the small-jobs binary (smalljobs.cu).
	SmallJobs string
}

// BuildReference writes the reference sources into dir and compiles them
// with nvcc for the GPU's architecture (arch such as "sm_90").
func BuildReference(ctx context.Context, dir, arch string) (*Reference, error) {
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		return nil, ErrNoNVCC
	}
	refDir := filepath.Join(dir, "bench", "reference")
	kDir := filepath.Join(dir, "ptx", "kernels")
	for _, d := range []string{refDir, kDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	entries, err := referenceFiles.ReadDir("reference")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, _ := referenceFiles.ReadFile("reference/" + e.Name())
		if err := os.WriteFile(filepath.Join(refDir, e.Name()), b, 0o644); err != nil {
			return nil, err
		}
	}
	for _, k := range kernels.All() {
		if err := os.WriteFile(filepath.Join(kDir, k.Name+".cu"), k.Source(), 0o644); err != nil {
			return nil, err
		}
	}
	r := &Reference{Dir: dir, Pipeline: filepath.Join(dir, "pipeline"), Launch: filepath.Join(dir, "launch"), Multi: filepath.Join(dir, "multi"),
		SmallJobs: filepath.Join(dir, "smalljobs")}
	for _, b := range []struct{ out, src, lib string }{{r.Pipeline, "pipeline.cu", ""}, {r.Launch, "launch.cu", "-lcuda"}, {r.Multi, "multi.cu", ""},
		{r.SmallJobs, "smalljobs.cu", ""}} {
		args := []string{"-O3", "-arch=" + arch, "-o", b.out, filepath.Join(refDir, b.src)}
		if b.lib != "" {
			args = append(args, b.lib)
		}
		out, err := command(ctx, nvcc, args...).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("bench: nvcc %s: %v\n%s", b.src, err, out)
		}
	}
	return r, nil
}

// RefPipeline is one line of the reference pipeline's output.
type RefPipeline struct {
	Chunk, Slots     int
	BestMs, MeanMs   float64
	Mismatches       int
	StageH2DMs       float64
	StageComputeMs   float64
	StageD2HMs       float64
	StageBoundMs     float64
	StageChunkElems  int
	HasStageEstimate bool
}

// RunPipeline runs the reference pipeline on n elements with iters, slots
// and reps for each chunk size, and parses its report.
func (r *Reference) RunPipeline(ctx context.Context, n, iters, slots, reps int, chunks []int) ([]RefPipeline, error) {
	args := []string{strconv.Itoa(n), strconv.Itoa(iters), strconv.Itoa(slots), strconv.Itoa(reps)}
	for _, c := range chunks {
		args = append(args, strconv.Itoa(c))
	}
	out, err := command(ctx, r.Pipeline, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("bench: reference pipeline: %v\n%s", err, out)
	}
	return ParsePipelineOutput(out)
}

// ParsePipelineOutput reads the reference pipeline's "stage" and
// "pipeline" lines.
func ParsePipelineOutput(out []byte) ([]RefPipeline, error) {
	var stage RefPipeline
	var res []RefPipeline
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		kind, _, num := fields(line)
		switch kind {
		case "stage":
			stage = RefPipeline{StageH2DMs: num("h2d_ms"), StageComputeMs: num("compute_ms"), StageD2HMs: num("d2h_ms"),
				StageBoundMs: num("bound_ms"), StageChunkElems: int(num("chunk")), HasStageEstimate: true}
		case "pipeline":
			p := stage
			p.Chunk, p.Slots = int(num("chunk")), int(num("slots"))
			p.BestMs, p.MeanMs, p.Mismatches = num("best_ms"), num("mean_ms"), int(num("mismatches"))
			res = append(res, p)
		}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("bench: no pipeline results in the reference's output:\n%s", out)
	}
	return res, nil
}

// RefMulti is the multi-GPU reference's result: one job split statically
// over Devices GPUs, each driven by its own host thread.
type RefMulti struct {
	Devices, Chunk, Slots, ComputeStreams, Iters int
	Elems                                        int
	BestMs, MeanMs                               float64
	Mismatches                                   int
	// PerDevice are each GPU's share (elements) and own best time.
	PerDevice []RefMultiDevice
}

// RefMultiDevice is one GPU's line of the multi-GPU reference.
type RefMultiDevice struct {
	Device, Elems int
	BestMs        float64
}

// RunMulti runs the multi-GPU reference over n elements on the first
// devices GPUs (0: all of them), with iters, slots, reps runs after a
// warm-up, chunk elements per chunk and compute streams.
func (r *Reference) RunMulti(ctx context.Context, n, iters, slots, reps, chunk, compute, devices int) (RefMulti, error) {
	args := []string{strconv.Itoa(n), strconv.Itoa(iters), strconv.Itoa(slots), strconv.Itoa(reps),
		strconv.Itoa(chunk), strconv.Itoa(compute), strconv.Itoa(devices)}
	out, err := command(ctx, r.Multi, args...).CombinedOutput()
	if err != nil {
		return RefMulti{}, fmt.Errorf("bench: multi-GPU reference: %v\n%s", err, out)
	}
	return ParseMultiOutput(out)
}

// ParseMultiOutput reads the multi-GPU reference's "multi" and
// "multidev" lines.
func ParseMultiOutput(out []byte) (RefMulti, error) {
	var m RefMulti
	found := false
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		kind, _, num := fields(line)
		switch kind {
		case "multi":
			found = true
			m.Devices, m.Chunk, m.Slots = int(num("devices")), int(num("chunk")), int(num("slots"))
			m.ComputeStreams, m.Elems, m.Iters = int(num("compute_streams")), int(num("elems")), int(num("iters"))
			m.BestMs, m.MeanMs, m.Mismatches = num("best_ms"), num("mean_ms"), int(num("mismatches"))
		case "multidev":
			m.PerDevice = append(m.PerDevice, RefMultiDevice{Device: int(num("device")), Elems: int(num("elems")), BestMs: num("best_ms")})
		}
	}
	if !found || m.BestMs <= 0 {
		return m, fmt.Errorf("bench: no result in the multi-GPU reference's output:\n%s", out)
	}
	return m, nil
}

// RefSmallJobs is one cell of the small-jobs reference: Workers host
// threads, each with its own stream, running jobs of Elems elements (H2D,
// seed kernel, D2H, stream synchronise) back to back.
type RefSmallJobs struct {
	Wait           string
	Elems, Workers int
	Iters          int
	Jobs           int
	Seconds        float64
	JobsPerSec     float64
	P50us, P99us   float64
	CPUusPerJob    float64
	Mismatches     int
}

// RunSmallJobs runs the small-jobs reference in wait mode wait (spin,
// yield, block, auto or default), for seconds per cell, or at most maxJobs
// jobs per worker when maxJobs > 0, over every size and worker count, and
// parses its report.
func (r *Reference) RunSmallJobs(ctx context.Context, wait string, iters int, seconds float64, maxJobs int, sizes, workers []int) ([]RefSmallJobs, error) {
	list := func(xs []int) string {
		var s []string
		for _, x := range xs {
			s = append(s, strconv.Itoa(x))
		}
		return strings.Join(s, ",")
	}
	args := []string{strconv.Itoa(iters), strconv.FormatFloat(seconds, 'f', -1, 64), wait, strconv.Itoa(maxJobs), list(sizes), list(workers)}
	out, err := command(ctx, r.SmallJobs, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("bench: small-jobs reference: %v\n%s", err, out)
	}
	return ParseSmallJobsOutput(out)
}

// ParseSmallJobsOutput reads the small-jobs reference's "smalljobs" lines.
// A line without a positive job rate is an error.
func ParseSmallJobsOutput(out []byte) ([]RefSmallJobs, error) {
	var res []RefSmallJobs
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		kind, kv, num := fields(line)
		if kind != "smalljobs" {
			continue
		}
		c := RefSmallJobs{Wait: kv["wait"], Elems: int(num("elems")), Workers: int(num("workers")), Iters: int(num("iters")),
			Jobs: int(num("jobs")), Seconds: num("seconds"), JobsPerSec: num("jobs_per_s"), P50us: num("p50_us"), P99us: num("p99_us"),
			CPUusPerJob: num("cpu_us_per_job"), Mismatches: int(num("mismatches"))}
		if c.JobsPerSec <= 0 || c.Elems <= 0 || c.Workers <= 0 {
			return nil, fmt.Errorf("bench: small-jobs reference: bad line %q", line)
		}
		res = append(res, c)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("bench: no result in the small-jobs reference's output:\n%s", out)
	}
	return res, nil
}

// fields splits a reference program's output line, "kind key=value …",
// into its kind, its values by key, and a reader of a value as a number
// (0 when absent or not a number).
func fields(line string) (kind string, kv map[string]string, num func(string) float64) {
	f := strings.Fields(line)
	kv = map[string]string{}
	if len(f) == 0 {
		return "", kv, func(string) float64 { return 0 }
	}
	for _, x := range f[1:] {
		if k, v, ok := strings.Cut(x, "="); ok {
			kv[k] = v
		}
	}
	return f[0], kv, func(k string) float64 { v, _ := strconv.ParseFloat(kv[k], 64); return v }
}
