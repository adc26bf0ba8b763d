"""Names the PyTorch the benchmarks compare against, as one line for their headers and JSON:
`torch VERSION | BLAS NAME | oneDNN VERSION | CPU capability NAME` (a part the build does not
report is left out)."""
import re

import torch

config = torch.__config__.show()
parts = [f"torch {torch.__version__}"]
blas = re.search(r"BLAS_INFO=([^,\s]+)", config)
onednn = re.search(r"(?:MKL-DNN|oneDNN\)) (v[0-9.]+)", config)
capability = re.search(r"CPU capability usage: (\S+)", config)
if blas:
    parts.append(f"BLAS {blas.group(1)}")
if onednn:
    parts.append(f"oneDNN {onednn.group(1)}")
if capability:
    parts.append(f"CPU capability {capability.group(1)}")
print(" | ".join(parts), flush=True)
