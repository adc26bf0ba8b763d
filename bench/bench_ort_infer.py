"""onnxruntime side of `ember bench infer`: runs the ONNX file ember exported for the saved model
(f32) and the same file after onnxruntime's quantize_dynamic (int8 weights, int8 activations
quantized per call, as ember's dynamic int8), on the test images, with intra-op threads as ember's
OpenMP threads; prints the version, both models' test accuracy and per variant and batch size
`NAME bB mean_us X p50_us X p95_us X p99_us X samples_per_s X`, timed as ember times its own.
Only the session being timed exists while it runs: each session keeps a pool of intra-op threads
that spin after their work, and with both alive the idle one's spinning took a core from the
timed one (p50 at batch 64 of the 784-512-256-10 MLP on 2 cores: f32 346-628 us, int8 130-202 us
with both alive; 337-363 us and 133-156 us alone).
Runs in the test venv (build/venv, made by setup.sh), which has onnxruntime."""
import argparse
import logging
import os
import sys
import tempfile

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic

from infer_timing import keep_best, print_rows, read_images, read_labels


def session(path, threads):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    shape = s.get_inputs()[0].shape[1:]  # the batch axis is dim 0
    return (lambda x: s.run(None, {name: x.reshape(x.shape[0], *shape)})[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="the f32 ONNX file")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=1000)
    a = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic's advice on pre-processing
    print(f"onnxruntime {ort.__version__} intra-op threads {a.threads} "
          f"(CPUExecutionProvider, all graph optimizations, one session at a time)", flush=True)
    x64 = read_images(f"{a.data}/t10k-images-idx3-ubyte.gz", 64)
    xt = read_images(f"{a.data}/t10k-images-idx3-ubyte.gz", 10000)
    yt = read_labels(f"{a.data}/t10k-labels-idx1-ubyte.gz")
    with tempfile.TemporaryDirectory() as tmp:
        int8_path = os.path.join(tmp, "int8.onnx")
        quantize_dynamic(a.model, int8_path, weight_type=QuantType.QInt8)
        paths = {"ort_f32": a.model, "ort_int8": int8_path}
        best, acc = {}, {}
        for _ in range(2):
            for name, path in paths.items():
                run = session(path, a.threads)
                keep_best(best, name, run, x64[:1], x64, a.iters)
                acc[name] = np.mean(run(xt).argmax(1) == yt)
                del run  # its threads go with it
    print(" ".join(f"{name} test_acc {acc[name]:.4f}" for name in paths), flush=True)
    print_rows(best)
    return 0


if __name__ == "__main__":
    sys.exit(main())
