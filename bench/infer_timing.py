"""What the Python halves of `ember bench infer` share: the test images and ember's timing
protocol (per variant and batch size the better of two interleaved runs after warm-up, printed as
`NAME bB mean_us X p50_us X p95_us X p99_us X samples_per_s X`)."""
import gzip
import struct
import time

import numpy as np


def read_idx(path):
    """The bytes of an IDX file, gzipped or raw (as ember's reader takes both)."""
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def read_images(path, n):
    """The first n images of an IDX file as (n, rows * cols) float32 in [0, 1]."""
    data = read_idx(path)
    count, rows, cols = struct.unpack(">III", data[4:16])
    x = np.frombuffer(data, np.uint8, offset=16).reshape(count, rows * cols)[:n]
    return x.astype(np.float32) / 255


def read_labels(path):
    return np.frombuffer(read_idx(path), np.uint8, offset=8).astype(np.int64)


def latency(run, x, warmup, iters):
    """Percentiles of run(x) over iters timed calls after warmup untimed ones."""
    for _ in range(warmup):
        run(x)
    t = []
    for _ in range(iters):
        t0 = time.perf_counter()
        run(x)
        t.append(time.perf_counter() - t0)
    t.sort()
    mean = sum(t) / len(t)
    return {"mean_us": 1e6 * mean, "p50_us": 1e6 * t[len(t) // 2],
            "p95_us": 1e6 * t[int(0.95 * (len(t) - 1))],
            "p99_us": 1e6 * t[int(0.99 * (len(t) - 1))],
            "samples_per_s": x.shape[0] / mean}


def keep_best(best, name, run, x1, x64, iters):
    """One run of batch 1 and batch 64 as ember times its own; the better mean stays in best."""
    for batch, x, warm, n in ((1, x1, 100, iters // 2), (64, x64, 10, iters // 20 + 10)):
        r = latency(run, x, warm, n)
        if (name, batch) not in best or r["mean_us"] < best[(name, batch)]["mean_us"]:
            best[(name, batch)] = r


def print_rows(best):
    for (name, batch), r in best.items():
        print(f"{name} b{batch} mean_us {r['mean_us']:.2f} p50_us {r['p50_us']:.2f} "
              f"p95_us {r['p95_us']:.2f} p99_us {r['p99_us']:.2f} "
              f"samples_per_s {r['samples_per_s']:.1f}", flush=True)
