#!/usr/bin/python3
"""Reference values for tests/nn/test_nn_norms.c from PyTorch 2.15 (CPU, f64): F.group_norm,
F.instance_norm with and without running statistics, InstanceNorm2d tracking its statistics, and
BatchNorm1d(momentum=None)'s cumulative average over three batches. Inputs are element i:
sin(a i + b), as the test's wave() makes them. Prints the C initialisers the test holds; run it
again to regenerate them."""
import textwrap

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def wave(shape, a, b):
    """Element i: sin(a i + b)."""
    n = 1
    for d in shape:
        n *= d
    return torch.sin(a * torch.arange(n, dtype=torch.float64) + b).view(shape)


def c_array(name, t):
    body = ", ".join(f"{v:.10g}" for v in t.flatten().tolist())
    lines = textwrap.wrap(body, 92)
    print(f"static const double {name}[] = {{\n    " + "\n    ".join(lines) + "};")


# group_norm: (2, 6, 2, 2) in 3 groups, weight and bias; (2, 4, 3) in 2 groups, no affine
x = wave((2, 6, 2, 2), 0.7, 0.3) * 2
w, b = wave((6,), 1.1, 0.5), wave((6,), 0.9, -0.2)
c_array("group_norm_affine", F.group_norm(x, 3, w, b, 1e-5))
c_array("group_norm_plain", F.group_norm(wave((2, 4, 3), 0.45, 0.1), 2, None, None, 1e-3))

# instance_norm over (2, 3, 4) with weight and bias, updating running statistics (momentum 0.2)
x = wave((2, 3, 4), 0.8, 0.2) * 1.5
w, b = wave((3,), 1.3, 0.4), wave((3,), 0.6, -0.5)
rm, rv = wave((3,), 0.5, 0.0) * 0.1, 1 + wave((3,), 0.5, 1.0) ** 2
c_array("instance_norm_y", F.instance_norm(x, rm, rv, w, b, True, 0.2, 1e-5))
c_array("instance_norm_running_mean", rm)
c_array("instance_norm_running_var", rv)
c_array("instance_norm_eval", F.instance_norm(x, rm, rv, w, b, False, 0.2, 1e-5))

# InstanceNorm2d(2, affine=True, track_running_stats=True): two training steps, then eval
m = nn.InstanceNorm2d(2, affine=True, track_running_stats=True)
with torch.no_grad():
    m.weight.copy_(torch.tensor([1.5, -0.5]))
    m.bias.copy_(torch.tensor([0.25, 1.0]))
m(wave((2, 2, 3, 3), 0.6, 0.1))
m(wave((3, 2, 3, 3), 0.35, 0.9) * 2)
c_array("instance2d_running_mean", m.running_mean)
c_array("instance2d_running_var", m.running_var)
print(f"/* num_batches_tracked after them: {int(m.num_batches_tracked)} */")
m.eval()
c_array("instance2d_eval", m(wave((1, 2, 3, 3), 0.5, 0.2)))

# BatchNorm1d(3, momentum=None): three batches of different sizes, then eval
m = nn.BatchNorm1d(3, momentum=None)
for k, n in enumerate((4, 2, 5)):
    y = m(wave((n, 3), 0.9 + 0.1 * k, 0.3 * k) * (k + 1))
c_array("cumulative_last_y", y)
c_array("cumulative_running_mean", m.running_mean)
c_array("cumulative_running_var", m.running_var)
print(f"/* num_batches_tracked after them: {int(m.num_batches_tracked)} */")
m.eval()
c_array("cumulative_eval", m(wave((2, 3), 0.4, 0.0)))
