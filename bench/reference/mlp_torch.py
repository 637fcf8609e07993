#!/usr/bin/env python3
"""mlp_torch.py: the PyTorch twin of overlap's batched MLP inference.

It builds nn.Sequential(Linear, act, Linear) with a fixed seed,
  small: 768 -> 256 -> 16, ReLU
  large: 768 -> 3072 -> 768, GELU (exact erf form, nn.GELU's default),
or loads one (--model-file: a safetensors file of nn.Sequential Linear
layers, as overlap infer --gen-model writes them), saves it and its input
for the Go side, and measures inference over --rows input rows on the GPU
in several ways, each the median of --passes whole passes after one
warm-up pass, wall time around each pass with the GPU synchronized before
and after:

  (a) naive: pageable host tensors, each chunk .to('cuda') and copied back
      into a pageable output on the default stream (synchronous copies),
      at the largest --chunk-rows;
  (b) pinned host memory, non_blocking copies, one stream, chunked, at
      each --chunk-rows;
  (c) pinned, three streams: chunk i on stream i % 3 (H2D, compute, D2H),
      a ring of three device input slots, an event per slot recorded after
      its chunk's D2H and waited on before the slot is reused, at each
      --chunk-rows;
  (d) each stage alone over all chunks, at the chunk size of the fastest
      (c): H2D alone (pinned), compute alone (input already resident on
      the GPU), D2H alone (pinned), and H2D and D2H at once on two streams.

Files in --save-dir:
  model.safetensors  the state_dict (keys 0.weight [h, in], 0.bias [h],
                     2.weight [out, h], 2.bias [out], float32), metadata
                     {"activation": "relu" | "gelu"}; not written with
                     --model-file, which is the model;
  input.f32          the input, rows x in float32, little-endian, row-major:
                     uniform in [-1, 1), seeded, unless --input-file gives
                     it (then not written);
  output_torch.f32   the output of the fastest of (a)-(c), rows x out.

--precision tf32 sets torch.backends.cuda.matmul.allow_tf32 (fp32 clears
it). --activation overrides the model file's "activation" metadata (relu
without either). --json FILE writes every figure as JSON (what overlap
infer --reference reads). --device cpu is a smoke test of this script on a
machine without a GPU: the same steps, with the stream and event calls as
no-ops and no pinned memory (its figures mean nothing). Usage:
  python3 mlp_torch.py --model large --precision tf32 --rows 1048576 --save-dir DIR
  python3 - --model-file m.safetensors --rows 1048576 --chunk-rows 16384,65536 --json DIR/torch.json --save-dir DIR < mlp_torch.py
"""
import argparse
import contextlib
import ctypes
import json
import os
import re
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


DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def load_safetensors(path):
    """Reads a safetensors file by hand (8-byte little-endian header size,
    JSON header, raw little-endian data): its tensors as float32 and its
    metadata."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None) or {}
    tensors = {}
    for k, v in header.items():
        if v["dtype"] not in DTYPES:
            sys.exit("mlp_torch: %s: tensor %s is %s; F32, F16 and BF16 are read" % (path, k, v["dtype"]))
        b, e = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=DTYPES[v["dtype"]]) if e > b else torch.empty(0)
        tensors[k] = t.reshape(v["shape"]).to(torch.float32)
    return tensors, meta


def build_from_file(path, activation):
    """The model in path: the Linear layers "PREFIX.N.weight" [out, in] and
    "PREFIX.N.bias" [out] (zeros when absent) in order of N, with the
    activation between them (--activation, else the file's metadata, else
    relu)."""
    tensors, meta = load_safetensors(path)
    layers = {}
    for k in tensors:
        m = re.match(r"^(.*?)(0|[1-9][0-9]*)\.(weight|bias)$", k)
        if not m:
            sys.exit("mlp_torch: %s: tensor %s is not a Linear layer's weight or bias" % (path, k))
        layers.setdefault(int(m.group(2)), {})[m.group(3)] = tensors[k]
    act = activation or meta.get("activation", "relu")
    if act not in ("relu", "gelu"):
        sys.exit("mlp_torch: %s: activation %r (want relu or gelu)" % (path, act))
    mods, dims = [], None
    for i, idx in enumerate(sorted(layers)):
        w = layers[idx].get("weight")
        if w is None or w.dim() != 2:
            sys.exit("mlp_torch: %s: layer %d has no [out, in] weight" % (path, idx))
        if dims is None:
            dims = [w.shape[1]]
        elif w.shape[1] != dims[-1]:
            sys.exit("mlp_torch: %s: layer %d takes %d inputs, the one before gives %d" % (path, idx, w.shape[1], dims[-1]))
        dims.append(w.shape[0])
        lin = nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(w)
            lin.bias.copy_(layers[idx].get("bias", torch.zeros(w.shape[0])))
        if i > 0:
            mods.append(nn.ReLU() if act == "relu" else nn.GELU())
        mods.append(lin)
    return nn.Sequential(*mods).eval(), tuple(dims), act


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
    ap.add_argument("--rows", type=int, help="rows to run (default 1048576, or all of --input-file)")
    ap.add_argument("--model", choices=sorted(MODELS), default="small")
    ap.add_argument("--model-file", help="load this safetensors model instead of building --model")
    ap.add_argument("--activation", choices=["relu", "gelu"], help="with --model-file: the activation (default: the file's)")
    ap.add_argument("--input-file", help="read the input rows from this raw float32 file instead of generating them")
    ap.add_argument("--precision", choices=["fp32", "tf32"], default="fp32")
    ap.add_argument("--chunk-rows", default="65536", help="rows per chunk, or several, comma-separated, each measured")
    ap.add_argument("--save-dir", default="/tmp/mlp_torch")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--table", help="append the table to this file too")
    ap.add_argument("--json", help="write every figure to this file as JSON")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = ap.parse_args()
    try:
        a.chunks = sorted({int(c) for c in a.chunk_rows.split(",")})
    except ValueError:
        sys.exit("mlp_torch: --chunk-rows %r: want sizes such as 65536 or 16384,65536" % a.chunk_rows)
    if (a.rows is not None and a.rows < 1) or min(a.chunks) < 1 or a.passes < 1:
        sys.exit("mlp_torch: --rows, --chunk-rows and --passes must be at least 1")
    if a.activation and not a.model_file:
        sys.exit("mlp_torch: --activation goes with --model-file")
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

    if a.model_file:
        model, dims, act = build_from_file(a.model_file, a.activation)
        model_path, how = a.model_file, "read from --model-file"
    else:
        model, dims, act = build_model(a.model, a.seed)
        sd = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        model_path = os.path.join(a.save_dir, "model.safetensors")
        how = save_safetensors(sd, model_path, {"activation": act})
    model = model.to(dev)
    d_in, d_out = dims[0], dims[-1]

    # The input: from --input-file, or uniform in [-1, 1), seeded,
    # generated on the GPU chunk by chunk; held in pinned memory and
    # written to input.f32.
    if a.input_file:
        have = os.path.getsize(a.input_file) // (4 * d_in)
        rows = have if a.rows is None else a.rows
        if rows > have or rows < 1:
            sys.exit("mlp_torch: --input-file %s holds %d rows of %d float32, not %d" % (a.input_file, have, d_in, rows))
        src = torch.from_file(a.input_file, shared=False, size=have * d_in, dtype=torch.float32)
        x_pin = torch.empty((rows, d_in), dtype=torch.float32, pin_memory=g.cuda)
        x_pin.copy_(src[: rows * d_in].view(rows, d_in))
        del src
        input_path = a.input_file
    else:
        rows = (1 << 20) if a.rows is None else a.rows
        x_pin = torch.empty((rows, d_in), dtype=torch.float32, pin_memory=g.cuda)
        gen = torch.Generator(device=dev)
        gen.manual_seed(a.seed + 1)
        for i0, c in chunks(rows, max(a.chunks)):
            x_pin[i0 : i0 + c].copy_(torch.rand((c, d_in), generator=gen, device=dev) * 2 - 1)
        g.sync()
        input_path = os.path.join(a.save_dir, "input.f32")
        write_raw(x_pin, input_path)
    sizes = [min(c, rows) for c in a.chunks]
    sizes = sorted(set(sizes))
    out_pin = torch.empty((rows, d_out), dtype=torch.float32, pin_memory=g.cuda)
    x_page = torch.empty((rows, d_in), dtype=torch.float32).copy_(x_pin)
    out_page = torch.empty((rows, d_out), dtype=torch.float32)
    assert x_pin.is_pinned() == out_pin.is_pinned() == g.cuda and not x_page.is_pinned() and not out_page.is_pinned()

    results = []  # (key, name, chunk, (median, min))

    def naive(chunk):
        for i0, c in chunks(rows, chunk):
            y = model(x_page[i0 : i0 + c].to(dev))
            out_page[i0 : i0 + c].copy_(y)

    one = g.stream()

    def pinned_one_stream(chunk):
        with g.on(one):
            for i0, c in chunks(rows, chunk):
                y = model(x_pin[i0 : i0 + c].to(dev, non_blocking=True))
                out_pin[i0 : i0 + c].copy_(y, non_blocking=True)
        g.sync(one)

    streams = [g.stream() for _ in range(3)]
    slots = [torch.empty((max(sizes), d_in), dtype=torch.float32, device=dev) for _ in range(3)]
    slot_free = [g.event() for _ in range(3)]

    def three_streams(chunk):
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

    names = {
        "naive": "(a) naive: pageable, .to(cuda), default stream",
        "pinned_1_stream": "(b) pinned, non_blocking, 1 stream",
        "three_streams": "(c) pinned, 3 streams + events",
        "h2d_alone": "(d) H2D alone (pinned)",
        "compute_alone": "(d) compute alone (input resident)",
        "d2h_alone": "(d) D2H alone (pinned)",
        "h2d_d2h_at_once": "(d) H2D + D2H at once (2 streams)",
    }
    whole = {"naive": (naive, out_page), "pinned_1_stream": (pinned_one_stream, out_pin), "three_streams": (three_streams, out_pin)}

    def measure(key, fn, chunk):
        results.append((key, names[key], chunk, timed(g, lambda: fn(chunk), a.passes)))

    measure("naive", naive, sizes[-1])
    for c in sizes:
        measure("pinned_1_stream", pinned_one_stream, c)
    for c in sizes:
        measure("three_streams", three_streams, c)
    # Whole pipelines agree? (Same kernels, so normally bit for bit.)
    same = torch.equal(out_page, out_pin)
    maxdiff = 0.0 if same else (out_page - out_pin).abs().max().item()
    piped = [r for r in results if r[0] == "three_streams"]
    chunk = min(piped, key=lambda r: r[3][0])[2]

    # (d) the stages alone, at the fastest (c)'s chunk size.
    x_dev = torch.empty((rows, d_in), dtype=torch.float32, device=dev)
    out_dev = torch.empty((rows, d_out), dtype=torch.float32, device=dev)
    sa, sb = g.stream(), g.stream()
    x_dev.copy_(x_pin)
    for i0, c in chunks(rows, chunk):
        out_dev[i0 : i0 + c].copy_(model(x_dev[i0 : i0 + c]))
    g.sync()

    def h2d_alone(chunk):
        with g.on(sa):
            for i0, c in chunks(rows, chunk):
                x_dev[i0 : i0 + c].copy_(x_pin[i0 : i0 + c], non_blocking=True)
        g.sync(sa)

    def compute_alone(chunk):
        with g.on(sa):
            for i0, c in chunks(rows, chunk):
                model(x_dev[i0 : i0 + c])
        g.sync(sa)

    def d2h_alone(chunk):
        with g.on(sb):
            for i0, c in chunks(rows, chunk):
                out_pin[i0 : i0 + c].copy_(out_dev[i0 : i0 + c], non_blocking=True)
        g.sync(sb)

    def h2d_and_d2h(chunk):
        with g.on(sa):
            for i0, c in chunks(rows, chunk):
                x_dev[i0 : i0 + c].copy_(x_pin[i0 : i0 + c], non_blocking=True)
        with g.on(sb):
            for i0, c in chunks(rows, chunk):
                out_pin[i0 : i0 + c].copy_(out_dev[i0 : i0 + c], non_blocking=True)
        g.sync(sa)
        g.sync(sb)

    for key, fn in (("h2d_alone", h2d_alone), ("compute_alone", compute_alone), ("d2h_alone", d2h_alone), ("h2d_d2h_at_once", h2d_and_d2h)):
        measure(key, fn, chunk)

    # Write the fastest whole pipeline's output (run once more, so that the
    # buffer certainly holds it).
    best = min((r for r in results if r[0] in whole), key=lambda r: r[3][0])
    fn, out = whole[best[0]]
    fn(best[2])
    g.sync()
    output_path = os.path.join(a.save_dir, "output_torch.f32")
    write_raw(out, output_path)
    finite = bool(torch.isfinite(out).all())

    flop = 2.0 * rows * sum(dims[i] * dims[i + 1] for i in range(len(dims) - 1))
    in_b, out_b = rows * d_in * 4, rows * d_out * 4
    stage = {r[0]: r[3][0] for r in results if r[0] in ("h2d_alone", "compute_alone", "d2h_alone", "h2d_d2h_at_once")}
    bound = max(stage["h2d_alone"], stage["compute_alone"], stage["d2h_alone"])
    both_bound = max(bound, stage["h2d_d2h_at_once"])
    lines = []
    lines.append(
        "\n== mlp_torch: model %s (%s, %s), %s, rows %d, chunk %s, %s, torch %s, cuda %s, allow_tf32=%s"
        % (a.model_file or a.model, "->".join(map(str, dims)), act, a.precision, rows, ",".join(map(str, sizes)), g.name(),
           torch.__version__, torch.version.cuda, torch.backends.cuda.matmul.allow_tf32)
    )
    lines.append("%-46s %7s %10s %10s %14s  %s" % ("variant", "chunk", "median ms", "min ms", "rows/s", "note"))
    for key, name, c, (med, mn) in results:
        if key == "h2d_alone":
            note = "%.1f GB/s" % (in_b / med / 1e9)
        elif key == "d2h_alone":
            note = "%.1f GB/s" % (out_b / med / 1e9)
        elif key == "h2d_d2h_at_once":
            note = "%.1f GB/s in all" % ((in_b + out_b) / med / 1e9)
        elif key == "compute_alone":
            note = "%.1f TFLOP/s" % (flop / med / 1e12)
        else:
            note = "%.0f%% of the stage bound" % (100 * bound / med)
        if (key, c) == (best[0], best[2]):
            note += "  <- best"
        lines.append("%-46s %7d %10.2f %10.2f %14.4g  %s" % (name, c, med * 1e3, mn * 1e3, rows / med, note))
    lines.append(
        "stage bound max(H2D, compute, D2H) = %.2f ms (with H2D + D2H at once: %.2f ms); best whole pipeline: %s at chunk %d; "
        "(a) and (b)/(c) outputs %s; output finite: %s"
        % (bound * 1e3, both_bound * 1e3, best[1], best[2], "equal" if same else "differ by up to %.3g" % maxdiff, finite)
    )
    lines.append("files: %s (%s), %s %d B, %s %d B" % (model_path, how, input_path, in_b, output_path, out_b))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.table:
        with open(a.table, "a") as f:
            f.write(text)
    if a.json:
        doc = {
            "device": g.name(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "precision": a.precision,
            "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "rows": rows,
            "dims": list(dims),
            "activation": act,
            "passes": a.passes,
            "variants": [
                {"key": key, "name": name, "chunk_rows": c, "median_ms": med * 1e3, "min_ms": mn * 1e3}
                for key, name, c, (med, mn) in results
            ],
            "best": {"key": best[0], "name": best[1], "chunk_rows": best[2], "median_ms": best[3][0] * 1e3, "min_ms": best[3][1] * 1e3},
            "stage_bound_ms": bound * 1e3,
            "bound_ms": both_bound * 1e3,
            "outputs_equal": same,
            "max_diff": maxdiff,
            "finite": finite,
            "files": {"model": model_path, "input": input_path, "output": output_path},
        }
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    if not finite:
        sys.exit("mlp_torch: the output has non-finite values")


if __name__ == "__main__":
    main()
