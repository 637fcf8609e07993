#!/usr/bin/env python3
"""Writes tiny.safetensors: the model nn.Sequential(nn.Linear(3, 4), nn.ReLU(),
nn.Linear(4, 2)) with the weights below, as safetensors.torch.save_file(
model.state_dict(), "tiny.safetensors", metadata={"activation": "relu",
"format": "pt"}) lays it out, using only Python's standard library (no
PyTorch or safetensors needed):

- 8 bytes: the header's length, a little-endian u64;
- the header: compact JSON ("," and ":" without spaces), "__metadata__"
  first, then each tensor's {"dtype", "shape", "data_offsets"} in the order
  of its data, padded with spaces to a multiple of 8 bytes;
- the data: the tensors back to back, little-endian, sorted by dtype
  (larger first; all are F32 here) and then by name.

Every value is a multiple of 1/8, so the model's outputs are exact in
float32 and the test can state them.

Usage: python3 tiny.py  (writes tiny.safetensors beside this script)
"""
import json
import os
import struct

tensors = {
    "0.weight": ([4, 3], [0.5, -0.25, 1.0,
                          -1.0, 0.75, 0.125,
                          0.25, 0.25, -0.5,
                          2.0, -1.5, 0.375]),
    "0.bias": ([4], [0.125, -0.5, 0.0, 1.0]),
    "2.weight": ([2, 4], [1.0, -2.0, 0.5, 0.25,
                          -0.75, 1.25, 2.0, -0.125]),
    "2.bias": ([2], [-0.25, 0.5]),
}
metadata = {"activation": "relu", "format": "pt"}

header = {"__metadata__": metadata}
data = b""
for name in sorted(tensors):
    shape, values = tensors[name]
    blob = struct.pack("<%df" % len(values), *values)
    header[name] = {"dtype": "F32", "shape": shape,
                    "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
text = json.dumps(header, separators=(",", ":")).encode("utf-8")
text += b" " * ((8 - len(text) % 8) % 8)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny.safetensors")
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
