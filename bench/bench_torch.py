#!/usr/bin/python3
"""PyTorch side of `ember bench train`: the same recipes (MLP 784-512-256-10, the CNN), SGD with
momentum 0.9, random batches from Fashion-MNIST, on the CPU or a GPU, in f32 or under autocast
(f16 with a GradScaler); prints `CASE samples_per_s N` per case, the median of per-step times
after 10 warm-up steps (a GPU's queue waited for inside each step). With --compile the model runs
under torch.compile(mode="reduce-overhead") (CUDA graphs of its forward and backward; the
optimizer eager), or a line says why this PyTorch cannot compile it. Needs PyTorch (Debian's
python3-torch on the CPU)."""
import argparse, gzip, statistics, struct, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 2051:
        rows, cols = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, rows * cols)
    return np.frombuffer(data, np.uint8, offset=8)


def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


class CNN(nn.Module):
    """The cnn recipe (recipes/cnn.c) layer for layer, so the figures compare with ember's."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.f1 = nn.Linear(64 * 7 * 7, 128)
        self.f2 = nn.Linear(128, 10)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))


def samples_per_s(model, x, y, batch, steps, amp, compiled):
    device = x.device
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type) if amp == torch.float16 else None
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0)).to(device)
    times = []
    for i in range(steps + 10):
        j = perm[(i * batch) % (len(x) - batch):][:batch]
        xb, yb = x[j], y[j]
        sync()
        t = time.perf_counter()
        if compiled:  # a new step for the graphs' outputs
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            loss = F.cross_entropy(model(xb), yb)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        sync()
        if i >= 10:
            times.append(time.perf_counter() - t)
    return batch / statistics.median(times)


def compile_failure(e):
    """The first line of why torch.compile failed."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--cases", default="mlp_b64,mlp_b256,cnn_b64")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--amp", default="off", choices=["off", "f16", "bf16"])
    ap.add_argument("--compile", action="store_true",
                    help='the model under torch.compile(mode="reduce-overhead")')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    amp = {"off": None, "f16": torch.float16, "bf16": torch.bfloat16}[a.amp]
    device = torch.device(a.device)
    x = torch.tensor(read_idx(f"{a.data}/train-images-idx3-ubyte.gz"), dtype=torch.float32) / 255
    y = torch.tensor(read_idx(f"{a.data}/train-labels-idx1-ubyte.gz"), dtype=torch.long)
    x, y = x.to(device), y.to(device)
    print(f"torch {torch.__version__} threads {torch.get_num_threads()} device {device}"
          + (' torch.compile(mode="reduce-overhead")' if a.compile else ""), flush=True)
    for case in a.cases.split(","):
        name, batch = case.split("_b")
        torch.manual_seed(0)
        steps = a.steps if name == "mlp" or device.type == "cuda" else max(a.steps // 4, 10)
        model = (mlp() if name == "mlp" else CNN()).to(device)
        try:
            run = torch.compile(model, mode="reduce-overhead") if a.compile else model
            sps = samples_per_s(run, x, y, int(batch), steps, amp, a.compile)
        except Exception as e:  # the compiler's backends fail in many ways; say which
            if not a.compile:
                raise
            print(f"{case}: this PyTorch cannot compile it: {compile_failure(e)}", flush=True)
            continue
        print(f"{case} samples_per_s {sps:.0f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
