#!/usr/bin/env python3
"""Runs the guide's program (examples/first_training.c, docs/guide.md) in f32 and under bf16
autocast and checks every number it prints: the data's ring counts against the rings' areas, the
model's parameter count by hand, ten epochs whose training loss falls to a quarter of the first
epoch's or less, a validation accuracy of 0.95 at the end, the loaded model evaluating as the
trained one did, and the model file as safetensors reads it (a header naming every tensor and the
model tree). Usage: check_first_training.py PROGRAM"""
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

SAMPLES = 2000
# the rings' shares of the square [-1.5, 1.5)^2: radius 0.5, then up to 1, then beyond
AREAS = [math.pi * 0.25, math.pi * 0.75, 9 - math.pi]
# Linear(2, 64), Linear(64, 64), Linear(64, 3), each weights and bias
PARAMS = (2 * 64 + 64) + (64 * 64 + 64) + (64 * 3 + 3)
TENSORS = {"0.weight": [64, 2], "0.bias": [64], "2.weight": [64, 64], "2.bias": [64],
           "4.weight": [3, 64], "4.bias": [3]}


def fail(msg):
    print(f"first_training: {msg}", file=sys.stderr)
    sys.exit(1)


def check_model_file(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    meta = header.pop("__metadata__", {})
    shapes = {name: t["shape"] for name, t in header.items()}
    if shapes != TENSORS:
        fail(f"{path} holds {shapes}, expected {TENSORS}")
    model = (json.loads(meta.get("ember.model", "{}")) or {}).get("model", {})
    types = [model.get("type")] + [c.get("type") for c in model.get("children", {}).values()]
    if types != ["Sequential", "Linear", "ReLU", "Linear", "ReLU", "Linear"]:
        fail(f"{path}: the model tree in its metadata 'ember.model' holds {types}")


def run(program, workdir, amp):
    path = os.path.join(workdir, f"{amp}.safetensors")
    out = subprocess.run([program, path, amp], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        fail(f"{amp}: exit {out.returncode}: {out.stderr.strip()}")
    lines = out.stdout.splitlines()
    print(f"--- {amp}\n" + out.stdout, end="")

    m = re.fullmatch(r"data: (\d+) points, (\d+) (\d+) (\d+) in rings 0 1 2", lines[0])
    if not m or int(m[1]) != SAMPLES:
        fail(f"{amp}: data line '{lines[0]}'")
    counts = [int(c) for c in m.groups()[1:]]
    if sum(counts) != SAMPLES:
        fail(f"{amp}: ring counts {counts} do not add up to {SAMPLES}")
    for ring, (count, area) in enumerate(zip(counts, AREAS)):
        p = area / 9
        sigma = math.sqrt(SAMPLES * p * (1 - p))
        if abs(count - SAMPLES * p) > 4 * sigma:
            fail(f"{amp}: ring {ring} holds {count} points, expected {SAMPLES * p:.0f} +- 4 sigma")

    if lines[1] != f"model: {PARAMS} parameters":
        fail(f"{amp}: '{lines[1]}', expected {PARAMS} parameters")

    epochs = []
    for i, line in enumerate(lines[2:12], 1):
        m = re.fullmatch(rf"epoch {i} train_loss ([0-9.]+) val_loss ([0-9.]+) val_acc ([0-9.]+)",
                         line)
        if not m:
            fail(f"{amp}: '{line}' is not epoch {i}'s line")
        epochs.append(tuple(float(v) for v in m.groups()))
    first, last = epochs[0], epochs[-1]
    if not last[0] <= first[0] / 4:
        fail(f"{amp}: the training loss went from {first[0]} to {last[0]}, not to a quarter")
    if not first[0] < math.log(3):
        fail(f"{amp}: epoch 1's mean loss {first[0]} is not below chance's ln 3")
    if last[2] < 0.95:
        fail(f"{amp}: validation accuracy {last[2]} after {len(epochs)} epochs, expected >= 0.95")

    m = re.fullmatch(rf"loaded {re.escape(path)}: val_loss ([0-9.]+) val_acc ([0-9.]+)", lines[12])
    if not m or (float(m[1]), float(m[2])) != last[1:]:
        fail(f"{amp}: '{lines[12]}', expected the trained model's {last[1:]}")
    if len(lines) != 13:
        fail(f"{amp}: {len(lines)} lines printed, expected 13")
    check_model_file(path)
    return epochs


def main():
    with tempfile.TemporaryDirectory() as workdir:
        f32 = run(sys.argv[1], workdir, "f32")
        bf16 = run(sys.argv[1], workdir, "bf16")
    if f32 == bf16:
        fail("the bf16 run printed the f32 run's numbers: autocast changed nothing")
    print("first_training: f32 and bf16 runs train, save and load as the guide says")


if __name__ == "__main__":
    main()
