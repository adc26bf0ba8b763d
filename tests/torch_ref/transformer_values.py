#!/usr/bin/python3
"""Reference values for tests/models/test_transformer.c from PyTorch (python3-torch 1.13): PyTorch's
MultiheadAttention (batch_first), TransformerEncoderLayer (norm_first, gelu) and a GPT built from
them, with every parameter set by the formula the test uses. Prints the C initialisers the test
holds; run it again to regenerate them."""
import math
import textwrap

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def fill(model):
    """Parameter k (in named_parameters order), element i: 0.3 sin(0.7 i + 1.3 k + 0.1)."""
    for k, (_, p) in enumerate(model.named_parameters()):
        i = torch.arange(p.numel(), dtype=torch.float64)
        p.data.copy_((0.3 * torch.sin(0.7 * i + 1.3 * k + 0.1)).view_as(p))


def wave(shape, a):
    """Element i: cos(a i)."""
    n = math.prod(shape)
    return torch.cos(a * torch.arange(n, dtype=torch.float64)).view(shape)


def c_array(decl, values, note=""):
    """A C initialiser wrapped within 100 columns."""
    body = textwrap.fill(", ".join(values), 96, initial_indent="    ", subsequent_indent="    ")
    print(f"{decl} = {{{note}\n{body}}};")


def report(name, model, out):
    """The output's checksum sum(out * cos(0.3 i)) and 6 of its values, then backward of that
    checksum and each parameter grad's checksum sum(g * cos(0.3 i))."""
    w = wave(out.shape, 0.3)
    loss = (out * w).sum()
    loss.backward()
    flat = out.detach().flatten()
    picks = [0, 1, flat.numel() // 3, flat.numel() // 2, flat.numel() - 2, flat.numel() - 1]
    print(f"/* {name} */")
    print(f"static const double {name}_loss = {loss.item():.12g};")
    c_array(f"static const double {name}_values[6]", [f"{flat[j].item():.12g}" for j in picks],
            f" /* at {picks} */")
    sums = [f"{(p.grad.flatten() * wave((p.numel(),), 0.3)).sum().item():.12g}"
            for p in model.parameters()]
    c_array(f"static const double {name}_grad_sums[{len(sums)}]", sums,
            " /* named_parameters order */")


def mha():
    torch.manual_seed(0)
    m = nn.MultiheadAttention(8, 2, batch_first=True)
    fill(m)
    x = wave((2, 5, 8), 0.45)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    report("mha_causal", m, m(x, x, x, attn_mask=causal, need_weights=False)[0])
    m.zero_grad()
    kv = wave((2, 4, 8), 0.21)
    pad = torch.tensor([[False, False, False, True], [False, True, False, False]])
    report("mha_cross", m, m(x, kv, kv, key_padding_mask=pad, need_weights=False)[0])


def layer():
    m = nn.TransformerEncoderLayer(8, 2, 16, 0.0, activation="gelu", batch_first=True,
                                   norm_first=True)
    fill(m)
    x = wave((2, 5, 8), 0.45)
    causal = torch.triu(torch.full((5, 5), float("-inf")), 1)
    report("layer_prenorm", m, m(x, src_mask=causal))
    post = nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True)
    fill(post)
    report("layer_postnorm", post, post(x))


class GPT(nn.Module):
    """bench/gpt_torch.py's model, at the test's size."""

    def __init__(self, vocab, block, n_layer, n_head, n_embd):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList(nn.TransformerEncoderLayer(n_embd, n_head, 4 * n_embd, 0.0,
                                                          activation="gelu", batch_first=True,
                                                          norm_first=True)
                               for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)

    def forward(self, idx):
        t = idx.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), 1)
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x, src_mask=mask)
        return F.linear(self.ln_f(x), self.wte.weight)


def gpt():
    m = GPT(11, 8, 2, 2, 8)
    fill(m)
    idx = torch.tensor([[(7 * i + 3) % 11 for i in range(6)], [(5 * i + 1) % 11 for i in range(6)]])
    report("gpt", m, m(idx))


if __name__ == "__main__":
    mha()
    layer()
    gpt()
