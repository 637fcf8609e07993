#!/usr/bin/env python3
"""mlp_torch.py: the PyTorch twin of overlap's batched MLP inference.

It builds nn.Sequential(Linear, act, Linear) with a fixed seed,
  small: 768 -> 256 -> 16, ReLU
  large: 768 -> 3072 -> 768, GELU (exact erf form, nn.GELU's default),
saves it and its input for the Go side, and measures inference over --rows
input rows on the GPU in several ways, each the median of --passes whole
passes after one warm-up pass, wall time around each pass with the GPU
synchronized before and after:

  (a) naive: pageable host tensors, each chunk .to('cuda') and copied back
      into a pageable output on the default stream (synchronous copies);
  (b) pinned host memory, non_blocking copies, one stream, chunked;
  (c) pinned, three streams: chunk i on stream i % 3 (H2D, compute, D2H),
      a ring of three device input slots, an event per slot recorded after
      its chunk's D2H and waited on before the slot is reused;
  (d) each stage alone over all chunks: H2D alone (pinned), compute alone
      (input already resident on the GPU), D2H alone (pinned), and H2D and
      D2H at once on two streams.

Files in --save-dir:
  model.safetensors  the state_dict (keys 0.weight [h, in], 0.bias [h],
                     2.weight [out, h], 2.bias [out], float32), metadata
                     {"activation": "relu" | "gelu"};
  input.f32          the input, rows x in float32, little-endian, row-major;
  output_torch.f32   the output of the fastest of (a)-(c), rows x out.

--precision tf32 sets torch.backends.cuda.matmul.allow_tf32 (fp32 clears
it). --device cpu is a smoke test of this script on a machine without a
GPU: the same steps, with the stream and event calls as no-ops and no
pinned memory (its figures mean nothing). Usage:
  python3 mlp_torch.py --model large --precision tf32 --rows 1048576 --save-dir DIR
"""
import argparse
import contextlib
import ctypes
import json
import os
import statistics
import struct
import sys
import time

import torch
from torch import nn

MODELS = {
    "small": ((768, 256, 16), "relu"),
    "large": ((768, 3072, 768), "gelu"),
}


def build_model(name, seed):
    dims, act = MODELS[name]
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(dims[0], dims[1]),
        nn.ReLU() if act == "relu" else nn.GELU(),
        nn.Linear(dims[1], dims[2]),
    )
    return model.eval(), dims, act


def raw_bytes(t, off=0, n=None):
    """The bytes of a contiguous CPU tensor (little-endian on x86), from
    byte off, n of them (to the end by default); no numpy needed."""
    total = t.numel() * t.element_size()
    n = total - off if n is None else n
    return ctypes.string_at(t.data_ptr() + off, n)


def write_raw(t, path):
    """Writes a contiguous CPU tensor's bytes to path, 64 MiB at a time."""
    assert t.is_contiguous() and t.device.type == "cpu"
    total, step = t.numel() * t.element_size(), 1 << 26
    with open(path, "wb") as f:
        for off in range(0, total, step):
            f.write(raw_bytes(t, off, min(step, total - off)))


def save_safetensors(tensors, path, metadata):
    """Writes tensors with safetensors when it is installed, else in the
    same format by hand (8-byte little-endian header size, JSON header,
    raw little-endian data)."""
    try:
        from safetensors.torch import save_file

        save_file(tensors, path, metadata=metadata)
        return "safetensors.torch.save_file"
    except ImportError:
        pass
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for k in sorted(tensors):
        t = tensors[k]
        assert t.dtype == torch.float32 and sys.byteorder == "little"
        b = raw_bytes(t.contiguous())
        header[k] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    return "built-in writer (safetensors not installed)"


class Gpu:
    """The CUDA calls that the measurements make; on the CPU (--device cpu)
    they do nothing."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"

    def stream(self):
        return torch.cuda.Stream() if self.cuda else None

    def event(self):
        return torch.cuda.Event() if self.cuda else None

    def on(self, s):
        return torch.cuda.stream(s) if self.cuda else contextlib.nullcontext()

    def sync(self, s=None):
        if self.cuda:
            if s is None:
                torch.cuda.synchronize()
            else:
                s.synchronize()

    def wait(self, s, e):
        if self.cuda:
            s.wait_event(e)

    def record(self, e, s):
        if self.cuda:
            e.record(s)

    def name(self):
        return torch.cuda.get_device_name(0) if self.cuda else "cpu (smoke test)"


def chunks(rows, chunk):
    for i0 in range(0, rows, chunk):
        yield i0, min(chunk, rows - i0)


def timed(g, fn, passes):
    fn()  # warm-up
    g.sync()
    ts = []
    for _ in range(passes):
        g.sync()
        t0 = time.perf_counter()
        fn()
        g.sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1 << 20)
    ap.add_argument("--model", choices=sorted(MODELS), default="small")
    ap.add_argument("--precision", choices=["fp32", "tf32"], default="fp32")
    ap.add_argument("--chunk-rows", type=int, default=65536)
    ap.add_argument("--save-dir", default="/tmp/mlp_torch")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--table", help="append the table to this file too")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = ap.parse_args()
    if a.rows < 1 or a.chunk_rows < 1 or a.passes < 1:
        sys.exit("mlp_torch: --rows, --chunk-rows and --passes must be at least 1")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("mlp_torch: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    os.makedirs(a.save_dir, exist_ok=True)
    with torch.inference_mode():
        run(a)


def run(a):
    dev = torch.device(a.device)
    g = Gpu(dev)
    rows, chunk = a.rows, min(a.chunk_rows, a.rows)

    model, dims, act = build_model(a.model, a.seed)
    sd = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    how = save_safetensors(sd, os.path.join(a.save_dir, "model.safetensors"), {"activation": act})
    model = model.to(dev)
    d_in, d_out = dims[0], dims[-1]

    # The input: uniform in [-1, 1), seeded, generated on the GPU chunk by
    # chunk, held in pinned memory and written to input.f32.
    x_pin = torch.empty((rows, d_in), dtype=torch.float32, pin_memory=g.cuda)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed + 1)
    for i0, c in chunks(rows, chunk):
        x_pin[i0 : i0 + c].copy_(torch.rand((c, d_in), generator=gen, device=dev) * 2 - 1)
    g.sync()
    write_raw(x_pin, os.path.join(a.save_dir, "input.f32"))
    out_pin = torch.empty((rows, d_out), dtype=torch.float32, pin_memory=g.cuda)
    x_page = torch.empty((rows, d_in), dtype=torch.float32).copy_(x_pin)
    out_page = torch.empty((rows, d_out), dtype=torch.float32)
    assert x_pin.is_pinned() == out_pin.is_pinned() == g.cuda and not x_page.is_pinned() and not out_page.is_pinned()

    results = {}

    def naive():
        for i0, c in chunks(rows, chunk):
            y = model(x_page[i0 : i0 + c].to(dev))
            out_page[i0 : i0 + c].copy_(y)

    one = g.stream()

    def pinned_one_stream():
        with g.on(one):
            for i0, c in chunks(rows, chunk):
                y = model(x_pin[i0 : i0 + c].to(dev, non_blocking=True))
                out_pin[i0 : i0 + c].copy_(y, non_blocking=True)
        g.sync(one)

    streams = [g.stream() for _ in range(3)]
    slots = [torch.empty((chunk, d_in), dtype=torch.float32, device=dev) for _ in range(3)]
    slot_free = [g.event() for _ in range(3)]

    def three_streams():
        for i, (i0, c) in enumerate(chunks(rows, chunk)):
            s = i % 3
            st = streams[s]
            with g.on(st):
                if i >= 3:
                    # The slot's last reader was the previous chunk on it. With one
                    # stream per slot this wait is already implied by stream order;
                    # it keeps the ring correct for any streams/slots pairing.
                    g.wait(st, slot_free[s])
                xin = slots[s][:c]
                xin.copy_(x_pin[i0 : i0 + c], non_blocking=True)
                y = model(xin)  # allocated on st by the caching allocator: reused only in st's order
                out_pin[i0 : i0 + c].copy_(y, non_blocking=True)
                g.record(slot_free[s], st)
        for st in streams:
            g.sync(st)

    results["(a) naive: pageable, .to(cuda), default stream"] = timed(g, naive, a.passes)
    results["(b) pinned, non_blocking, 1 stream"] = timed(g, pinned_one_stream, a.passes)
    results["(c) pinned, 3 streams + events"] = timed(g, three_streams, a.passes)
    # Whole pipelines agree? (Same kernels, so normally bit for bit.)
    same = torch.equal(out_page, out_pin)
    maxdiff = 0.0 if same else (out_page - out_pin).abs().max().item()

    # (d) the stages alone.
    x_dev = torch.empty((rows, d_in), dtype=torch.float32, device=dev)
    out_dev = torch.empty((rows, d_out), dtype=torch.float32, device=dev)
    sa, sb = g.stream(), g.stream()
    x_dev.copy_(x_pin)
    for i0, c in chunks(rows, chunk):
        out_dev[i0 : i0 + c].copy_(model(x_dev[i0 : i0 + c]))
    g.sync()

    def h2d_alone():
        with g.on(sa):
            for i0, c in chunks(rows, chunk):
                x_dev[i0 : i0 + c].copy_(x_pin[i0 : i0 + c], non_blocking=True)
        g.sync(sa)

    def compute_alone():
        with g.on(sa):
            for i0, c in chunks(rows, chunk):
                model(x_dev[i0 : i0 + c])
        g.sync(sa)

    def d2h_alone():
        with g.on(sb):
            for i0, c in chunks(rows, chunk):
                out_pin[i0 : i0 + c].copy_(out_dev[i0 : i0 + c], non_blocking=True)
        g.sync(sb)

    def h2d_and_d2h():
        with g.on(sa):
            for i0, c in chunks(rows, chunk):
                x_dev[i0 : i0 + c].copy_(x_pin[i0 : i0 + c], non_blocking=True)
        with g.on(sb):
            for i0, c in chunks(rows, chunk):
                out_pin[i0 : i0 + c].copy_(out_dev[i0 : i0 + c], non_blocking=True)
        g.sync(sa)
        g.sync(sb)

    stages = {
        "(d) H2D alone (pinned)": h2d_alone,
        "(d) compute alone (input resident)": compute_alone,
        "(d) D2H alone (pinned)": d2h_alone,
        "(d) H2D + D2H at once (2 streams)": h2d_and_d2h,
    }
    for k, fn in stages.items():
        results[k] = timed(g, fn, a.passes)

    # Write the fastest whole pipeline's output (run once more, so that the
    # buffer certainly holds it).
    runs = {
        "(a) naive: pageable, .to(cuda), default stream": (naive, out_page),
        "(b) pinned, non_blocking, 1 stream": (pinned_one_stream, out_pin),
        "(c) pinned, 3 streams + events": (three_streams, out_pin),
    }
    best = min(runs, key=lambda k: results[k][0])
    runs[best][0]()
    g.sync()
    out = runs[best][1]
    write_raw(out, os.path.join(a.save_dir, "output_torch.f32"))
    finite = bool(torch.isfinite(out).all())

    flop = 2.0 * rows * sum(dims[i] * dims[i + 1] for i in range(len(dims) - 1))
    in_b, out_b = rows * d_in * 4, rows * d_out * 4
    t_h2d = results["(d) H2D alone (pinned)"][0]
    t_cmp = results["(d) compute alone (input resident)"][0]
    t_d2h = results["(d) D2H alone (pinned)"][0]
    bound = max(t_h2d, t_cmp, t_d2h)
    lines = []
    lines.append(
        "\n== mlp_torch: model %s (%s, %s), %s, rows %d, chunk %d, %s, torch %s, cuda %s, allow_tf32=%s"
        % (a.model, "->".join(map(str, dims)), act, a.precision, rows, chunk, g.name(),
           torch.__version__, torch.version.cuda, torch.backends.cuda.matmul.allow_tf32)
    )
    lines.append("%-46s %10s %10s %14s  %s" % ("variant", "median ms", "min ms", "rows/s", "note"))
    for k, (med, mn) in results.items():
        note = ""
        if "H2D alone" in k:
            note = "%.1f GB/s" % (in_b / med / 1e9)
        elif "D2H alone" in k:
            note = "%.1f GB/s" % (out_b / med / 1e9)
        elif "at once" in k:
            note = "%.1f GB/s in all" % ((in_b + out_b) / med / 1e9)
        elif "compute" in k:
            note = "%.1f TFLOP/s" % (flop / med / 1e12)
        else:
            note = "%.0f%% of the stage bound" % (100 * bound / med)
        lines.append("%-46s %10.2f %10.2f %14.4g  %s" % (k, med * 1e3, mn * 1e3, rows / med, note))
    lines.append(
        "stage bound max(H2D, compute, D2H) = %.2f ms; best whole pipeline: %s; (a) and (b)/(c) outputs %s; "
        "output finite: %s" % (bound * 1e3, best, "equal" if same else "differ by up to %.3g" % maxdiff, finite)
    )
    lines.append(
        "files: %s (%s), input.f32 %d B, output_torch.f32 %d B in %s"
        % ("model.safetensors", how, in_b, out_b, a.save_dir)
    )
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.table:
        with open(a.table, "a") as f:
            f.write(text)
    if not finite:
        sys.exit("mlp_torch: the output has non-finite values")


if __name__ == "__main__":
    main()
