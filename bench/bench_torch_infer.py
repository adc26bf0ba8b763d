#!/usr/bin/python3
"""PyTorch side of `ember bench infer`: loads the f32 MLP that ember saved (a safetensors file,
read here without the safetensors package), runs it as is and after
torch.ao.quantization.quantize_dynamic (qint8 Linear) under each quantized engine this torch has
(torch_int8 is the fastest of them), prints both models' test accuracy (to compare with
`ember eval`) and per variant and batch size
`NAME bB mean_us X p50_us X p95_us X p99_us X samples_per_s X`, timed as ember times its own
(the better of two interleaved runs after warm-up). Runs under $EMBER_PYTHON (scripts/bench_venv.sh
makes one with the newest PyTorch) or Debian's python3-torch."""
import argparse, json, struct, sys

import numpy as np
import torch
import torch.nn as nn

from infer_timing import keep_best, print_rows, read_images, read_labels

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
    x64 = torch.from_numpy(read_images(f"{a.data}/t10k-images-idx3-ubyte.gz", 64))
    x1 = x64[:1]
    print(f"torch {torch.__version__} threads {torch.get_num_threads()} "
          f"quantized engines {','.join(engines)}", flush=True)
    best = {}

    def run(name, model):
        with torch.inference_mode():
            keep_best(best, name, model, x1, x64, a.iters)

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
    xt = torch.from_numpy(read_images(f"{a.data}/t10k-images-idx3-ubyte.gz", 10000))
    yt = torch.from_numpy(read_labels(f"{a.data}/t10k-labels-idx1-ubyte.gz"))
    with torch.inference_mode():  # the same model as ember's: compare with `ember eval`
        acc = {"f32": f32, f"int8_{torch.backends.quantized.engine}": int8}
        print(" ".join(f"torch_{k} test_acc {(m(xt).argmax(1) == yt).float().mean():.4f}"
                       for k, m in acc.items()), flush=True)
    print_rows(best)
    return 0


if __name__ == "__main__":
    sys.exit(main())
