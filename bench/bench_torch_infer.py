#!/usr/bin/python3
"""PyTorch side of `ember bench infer`: loads the f32 MLP that ember saved (a safetensors file,
read here without the safetensors package), runs it as is and after
torch.ao.quantization.quantize_dynamic (qint8 Linear) under each quantized engine this torch has
(torch_int8 is the fastest of them), prints both models' test accuracy (to compare with
`ember eval`) and per variant and batch size
`NAME bB mean_us X p50_us X p95_us X p99_us X samples_per_s X`, timed as ember times its own
(the better of two interleaved runs after warm-up). Needs Debian's python3-torch."""
import argparse, gzip, json, struct, sys, time

import numpy as np
import torch
import torch.nn as nn

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
          "I8": np.int8, "U8": np.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        buf = data[8 + n + begin:8 + n + end]
        out[name] = torch.from_numpy(np.frombuffer(buf, DTYPES[info["dtype"]]).copy()
                                     .reshape(info["shape"]))
    return out


def mlp_from_state(state):
    """Linear layers "0", "2", ... with ReLU between, sized from the file (shrunk ones too)."""
    idx = sorted(int(k.split(".")[0]) for k in state if k.endswith(".weight"))
    layers = []
    for j, i in enumerate(idx):
        w = state[f"{i}.weight"]
        if w.dim() != 2:
            return None
        lin = nn.Linear(w.shape[1], w.shape[0], bias=f"{i}.bias" in state)
        with torch.no_grad():
            lin.weight.copy_(w)
            if lin.bias is not None:
                lin.bias.copy_(state[f"{i}.bias"])
        layers.append(lin)
        if j + 1 < len(idx):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).eval()


def read_images(path, n):
    with gzip.open(path, "rb") as f:
        data = f.read()
    count, rows, cols = struct.unpack(">III", data[4:16])
    x = np.frombuffer(data, np.uint8, offset=16).reshape(count, rows * cols)[:n]
    return torch.tensor(x, dtype=torch.float32) / 255


def latency(model, x, warmup, iters):
    with torch.inference_mode():
        for _ in range(warmup):
            model(x)
        t = []
        for _ in range(iters):
            t0 = time.perf_counter()
            model(x)
            t.append(time.perf_counter() - t0)
    t.sort()
    mean = sum(t) / len(t)
    return {"mean_us": 1e6 * mean, "p50_us": 1e6 * t[len(t) // 2],
            "p95_us": 1e6 * t[int(0.95 * (len(t) - 1))],
            "p99_us": 1e6 * t[int(0.99 * (len(t) - 1))],
            "samples_per_s": x.shape[0] / mean}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=1000)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    f32 = mlp_from_state(read_safetensors(a.model))
    if f32 is None:
        print("PyTorch half skipped: it runs MLP recipes (Linear layers) only")
        return 0
    engines = [e for e in ("fbgemm", "x86", "onednn", "qnnpack")
               if e in torch.backends.quantized.supported_engines]
    x64 = read_images(f"{a.data}/t10k-images-idx3-ubyte.gz", 64)
    x1 = x64[:1]
    print(f"torch {torch.__version__} threads {torch.get_num_threads()} "
          f"quantized engines {','.join(engines)}", flush=True)
    best = {}

    def run(name, model):
        for batch, x, warm, iters in ((1, x1, 100, a.iters // 2),
                                      (64, x64, 10, a.iters // 20 + 10)):
            r = latency(model, x, warm, iters)
            if (name, batch) not in best or r["mean_us"] < best[(name, batch)]["mean_us"]:
                best[(name, batch)] = r

    for _ in range(2):
        run("torch_f32", f32)
        for e in engines:  # each engine packs its own weights
            torch.backends.quantized.engine = e
            int8 = torch.ao.quantization.quantize_dynamic(f32, {nn.Linear}, dtype=torch.qint8)
            run(f"torch_int8_{e}", int8)
    for e in engines:  # torch_int8: the fastest engine at each batch size
        for batch in (1, 64):
            r = best[(f"torch_int8_{e}", batch)]
            key = ("torch_int8", batch)
            if key not in best or r["mean_us"] < best[key]["mean_us"]:
                best[key] = r
    xt = read_images(f"{a.data}/t10k-images-idx3-ubyte.gz", 10000)
    with gzip.open(f"{a.data}/t10k-labels-idx1-ubyte.gz", "rb") as f:
        yt = torch.tensor(np.frombuffer(f.read(), np.uint8, offset=8), dtype=torch.long)
    with torch.inference_mode():  # the same model as ember's: compare with `ember eval`
        acc = {"f32": f32, f"int8_{torch.backends.quantized.engine}": int8}
        print(" ".join(f"torch_{k} test_acc {(m(xt).argmax(1) == yt).float().mean():.4f}"
                       for k, m in acc.items()), flush=True)
    for (name, batch), r in best.items():
        print(f"{name} b{batch} mean_us {r['mean_us']:.2f} p50_us {r['p50_us']:.2f} "
              f"p95_us {r['p95_us']:.2f} p99_us {r['p99_us']:.2f} "
              f"samples_per_s {r['samples_per_s']:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
