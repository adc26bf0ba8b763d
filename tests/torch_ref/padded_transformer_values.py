#!/usr/bin/python3
"""Reference values for tests/models/test_padded_transformer.c from PyTorch 2.15 (f64):
TransformerEncoderLayer with src_key_padding_mask and with a learned float src_mask (its
gradient too), scaled_dot_product_attention with a learned float attn_mask, and a small
classifier over padded token sequences (Embedding, one encoder layer with the padding mask, a
mean over the real tokens, Linear, cross entropy) with its loss over three SGD steps. Every
parameter is set by the formula the test uses. Prints the C initialisers the test holds; run it
again to regenerate them."""
import math
import textwrap
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
# a bool key padding mask beside a float src_mask is what the test gives ember too
warnings.filterwarnings("ignore", message="Support for mismatched")


def fill(params):
    """Parameter k (in named_parameters order), element i: 0.3 sin(0.7 i + 1.3 k + 0.1)."""
    for k, p in enumerate(params):
        i = torch.arange(p.numel(), dtype=torch.float64)
        p.data.copy_((0.3 * torch.sin(0.7 * i + 1.3 * k + 0.1)).view_as(p))


def wave(shape, a):
    """Element i: cos(a i)."""
    n = math.prod(shape)
    return torch.cos(a * torch.arange(n, dtype=torch.float64)).view(shape)


def checksum(t):
    """sum(t * cos(0.3 i)) over t's elements in row-major order"""
    return (t.flatten() * wave((t.numel(),), 0.3)).sum().item()


def c_array(decl, values, note=""):
    """A C initialiser wrapped within 100 columns."""
    body = textwrap.fill(", ".join(values), 96, initial_indent="    ", subsequent_indent="    ")
    print(f"{decl} = {{{note}\n{body}}};")


def report(name, params, out, extra=()):
    """The output's checksum, then backward of it and the checksum of each parameter's
    gradient (then of each extra tensor's)."""
    loss = (out * wave(out.shape, 0.3)).sum()
    loss.backward()
    print(f"/* {name} */")
    print(f"static const double {name}_loss = {loss.item():.12g};")
    sums = [f"{checksum(p.grad):.12g}" for p in list(params) + list(extra)]
    c_array(f"static const double {name}_grad_sums[{len(sums)}]", sums,
            " /* named_parameters order, then the mask */" if extra else
            " /* named_parameters order */")


PAD = torch.tensor([[False, False, False, False, True], [True, False, False, True, True]])


def layers():
    post = nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True)
    fill(post.parameters())
    x = wave((2, 5, 8), 0.45)
    report("layer_padded", post.parameters(), post(x, src_key_padding_mask=PAD))
    pre = nn.TransformerEncoderLayer(8, 2, 16, 0.0, activation="gelu", batch_first=True,
                                     norm_first=True)
    fill(pre.parameters())
    bias = (0.2 * wave((5, 5), 0.8)).requires_grad_()
    report("layer_bias", pre.parameters(), pre(x, src_mask=bias, src_key_padding_mask=PAD),
           extra=[bias])


def sdpa():
    q, k, v = wave((2, 2, 4, 3), 0.37), wave((2, 2, 5, 3), 0.53), wave((2, 2, 5, 3), 0.29)
    for t in (q, k, v):
        t.requires_grad_()
    bias = (0.5 * wave((1, 2, 4, 5), 0.61)).requires_grad_()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    report("sdpa_bias", [q, k, v], out, extra=[bias])


class Classifier(nn.Module):
    def __init__(self, vocab, d, heads, ff, classes):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.layer = nn.TransformerEncoderLayer(d, heads, ff, 0.0, batch_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, idx):
        pad = idx == 0
        x = self.layer(self.emb(idx), src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        return self.head((x * keep).sum(1) / keep.sum(1))


def tokens():
    """(3, 6) ids in [1, 11), 0 for padding: row 0 padded at its end, row 1 not, row 2 at both
    ends"""
    ids = torch.tensor([[(7 * i + 3) % 10 + 1 for i in range(6)] for _ in range(3)])
    ids[0, 4:] = 0
    ids[2, 0] = 0
    ids[2, 5] = 0
    ids[1] = torch.tensor([(5 * i + 2) % 10 + 1 for i in range(6)])
    return ids


def classifier():
    m = Classifier(11, 8, 2, 16, 3)
    fill(m.parameters())
    idx, labels = tokens(), torch.tensor([2, 0, 1])
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    losses = []
    for step in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(m(idx), labels)
        loss.backward()
        if step == 0:
            sums = [f"{checksum(p.grad):.12g}" for p in m.parameters()]
        losses.append(f"{loss.item():.12g}")
        opt.step()
    print("/* classifier: its loss before each of three SGD steps (lr 0.5) */")
    c_array("static const double classifier_losses[3]", losses)
    c_array(f"static const double classifier_grad_sums[{len(sums)}]", sums,
            " /* named_parameters order, the first step */")
    print("/* tokens: " + str(tokens().tolist()) + " */")


if __name__ == "__main__":
    layers()
    sdpa()
    classifier()
