#!/usr/bin/env python3
"""Runs the U-Net pair (examples/unet_denoiser.c, examples/unet_export.c) and checks what they
print and write: the denoiser trains under bf16 autocast with its loss falling every epoch to a
quarter of the noisy input's own, the model file holds a tree of the library's types only
(Concat and Identity among them), the other program loads it with no registration and gets the
same output on the sample, and its ONNX export runs in onnxruntime (the setup venv's) to within
1e-5 of ember's output, with a Concat node. Usage: check_unet.py DENOISER EXPORTER"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

EPOCHS = 8
BUILTIN = {"Sequential", "Concat", "Identity", "Conv2d", "GroupNorm", "SiLU", "MaxPool2d",
           "ConvTranspose2d"}


def fail(msg):
    print(f"unet: {msg}", file=sys.stderr)
    sys.exit(1)


def run(args):
    out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    print(f"--- {os.path.basename(args[0])}\n{out.stdout}", end="")
    if out.returncode != 0:
        fail(f"{args[0]}: exit {out.returncode}: {out.stderr.strip()}")
    return out.stdout.splitlines()


def types_in(node, seen):
    seen.add(node["type"])
    for child in node.get("children", {}).values():
        types_in(child, seen)
    return seen


def check_training(lines):
    m = re.fullmatch(r"model: (\d+) parameters; the noisy input's val_loss ([0-9.]+)", lines[0])
    if not m:
        fail(f"first line '{lines[0]}'")
    noisy = float(m[2])
    losses = []
    for i, line in enumerate(lines[1:1 + EPOCHS], 1):
        m = re.fullmatch(rf"epoch {i} train_loss ([0-9.]+) val_loss ([0-9.]+)", line)
        if not m:
            fail(f"'{line}' is not epoch {i}'s line")
        losses.append((float(m[1]), float(m[2])))
    for (a, _), (b, _) in zip(losses, losses[1:]):
        if not b < a:
            fail(f"the training loss did not fall every epoch: {losses}")
    if not losses[-1][1] < noisy / 4:
        fail(f"the last val_loss {losses[-1][1]} is not a quarter of the noisy input's {noisy}")
    m = re.fullmatch(r"saved (\S+); output sum on the sample (\S+)", lines[1 + EPOCHS])
    if not m:
        fail(f"'{lines[1 + EPOCHS]}' names no saved model")
    return m[1], m[2]


def check_model_file(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    tree = json.loads(header["__metadata__"]["ember.model"])["model"]
    types = types_in(tree, set())
    if not types <= BUILTIN or not {"Concat", "Identity", "ConvTranspose2d"} <= types:
        fail(f"{path}: the model tree holds {sorted(types)}")


def check_onnx(workdir):
    venv = os.environ.get("EMBER_VENV", "")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        if os.environ.get("CI"):
            fail(f"no Python virtualenv at {venv} (run bash setup.sh)")
        print("unet: onnxruntime check skipped: no Python virtualenv (run bash setup.sh)")
        return
    script = os.path.join(os.path.dirname(__file__), "..", "python", "onnx_check.py")
    files = [os.path.join(workdir, n) for n in ("unet.onnx", "sample.bin")]
    out = subprocess.run([python, script, files[0], files[1], "1x1x16x16",
                          os.path.join(workdir, "output.bin"), "1e-5", "--present", "Concat"],
                         capture_output=True, text=True, timeout=300)
    print(out.stdout + out.stderr, end="")
    if out.returncode != 0:
        fail("onnxruntime's output differs from ember's, or the graph is wrong")


def main():
    denoiser, exporter = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as workdir:
        model, trained_sum = check_training(run([denoiser, workdir]))
        check_model_file(model)
        lines = run([exporter, workdir])
        loaded = [l for l in lines if l.startswith("loaded ")]
        if loaded != [f"loaded {model}; output sum on the sample {trained_sum}"]:
            fail(f"the loaded model's output sum differs from the trained one's: {loaded}")
        if not any(re.match(r"\s+\d+ \(Concat\)\s", l) for l in lines):
            fail("the loaded model's summary shows no Concat")
        if lines[-1] != f"exported {os.path.join(workdir, 'unet.onnx')}":
            fail(f"last line '{lines[-1]}'")
        check_onnx(workdir)
    print("unet: trained under bf16 autocast, loaded with no registration, matched in "
          "onnxruntime")


if __name__ == "__main__":
    main()
