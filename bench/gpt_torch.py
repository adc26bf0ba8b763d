#!/usr/bin/python3
"""The gpt recipe in PyTorch, for comparing with `ember train gpt` and `ember bench train`: the
same text (recipes/gpt_data.c's cleaning of the fortunes), vocabulary and split, the same model
(nn.TransformerEncoderLayer blocks: pre-LN, causal, GELU, 4x feed-forward; tied LM head) with
GPT-2's init scheme, the same windows in the same order (ember's random sampler with replacement,
Philox-keyed), AdamW with weight decay on matrices only, warm-up + cosine, clipping at 1.

  gpt_torch.py train [--steps N --batch B --lr X --seed S --threads T]  one JSON summary line
  gpt_torch.py bench [--steps N --batch B --block T --threads T --amp off|f16|bf16 --compile]
               `gpt_bBATCH_tBLOCK tokens_per_s X` (--compile: the model under
               torch.compile(mode="reduce-overhead"), or a line saying why it cannot compile)
  gpt_torch.py sample --load FILE [--prompt TEXT --tokens N --temperature T --top-k K --seed S
               --threads T --text]   `cache chars_per_s X` and `no_cache chars_per_s X`: `ember
               sample gpt`'s generation from the same model file, with a key/value cache and
               without; --text prints the cached run's characters instead (`text "..."`)
"""
import argparse
import json
import math
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# recipes/recipes.h and recipes/gpt.c
FORTUNES = "/usr/share/games/fortunes"
N_LAYER, N_HEAD, N_EMBD, BLOCK = 4, 4, 128, 128
STEPS, BATCH, LR, WARMUP = 1000, 32, 3e-3, 100
WEIGHT_DECAY, BETA2, CLIP, VAL_STRIDE = 0.1, 0.99, 1.0, 4


def clean(data):
    """A file's bytes as recipes/gpt_data.c keeps them."""
    out = bytearray()
    for c in data:
        if c == 8:
            if out:
                out.pop()
        elif c in (9, 10) or 32 <= c < 127:
            out.append(c)
    if out and out[-1] != 10:
        out.append(10)
    if not out.endswith(b"%\n"):
        out += b"%\n"
    return bytes(out)


def load_text(folder):
    names = sorted(n for n in os.listdir(folder)
                   if "." not in n and n != "ascii-art"
                   and os.path.isfile(os.path.join(folder, n))
                   and not os.path.islink(os.path.join(folder, n)))
    text = b"".join(clean(open(os.path.join(folder, n), "rb").read()) for n in names)
    vocab = sorted(set(text))
    lut = np.zeros(256, np.int64)
    lut[vocab] = np.arange(len(vocab))
    ids = lut[np.frombuffer(text, np.uint8)]
    n_val = len(ids) // 10
    return vocab, ids, len(ids) - n_val


# ---- ember's sampler: data/sampler.c, random with replacement, epoch 0 ----
M64 = (1 << 64) - 1


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def philox_bits64(counters, key):
    """v1 << 32 | v0 of Philox-4x32-10 (backend/philox.h) at each counter, key as its seed."""
    m32 = np.uint64(0xFFFFFFFF)
    c0, c1 = counters & m32, counters >> np.uint64(32)
    c2, c3 = np.zeros_like(c0), np.zeros_like(c0)
    k0, k1 = key & 0xFFFFFFFF, key >> 32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        n0 = (p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0)
        n2 = (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1)
        c1, c3, c0, c2 = p1 & m32, p0 & m32, n0, n2
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c1 << np.uint64(32) | c0


def window_starts(seed, n_windows, count):
    key = mix64(seed ^ mix64(0 * 0x9E3779B97F4A7C15 + (1 << 32)))
    bits = philox_bits64(np.arange(count, dtype=np.uint64), key)
    n = np.uint64(n_windows)
    hi, lo = bits >> np.uint64(32), bits & np.uint64(0xFFFFFFFF)
    return ((hi * n + ((lo * n) >> np.uint64(32))) >> np.uint64(32)).astype(np.int64)


# ---- the model ----
class GPT(nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, n_embd, dropout=0.0):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(nn.TransformerEncoderLayer(n_embd, n_head, 4 * n_embd, dropout,
                                                          activation="gelu", batch_first=True,
                                                          norm_first=True)
                               for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():  # GPT-2's init, as models/gpt.c
            if "norm" in name or name.startswith("ln_f."):
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            elif name.endswith("out_proj.weight") or name.endswith("linear2.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        t = idx.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=idx.device), 1)
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(t, device=idx.device)))
        for block in self.h:
            x = block(x, src_mask=mask)
        return F.linear(self.ln_f(x), self.wte.weight)


def optimizer(model, lr):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, BETA2), eps=1e-8)


def lr_at(t, base, total):
    """optim/scheduler.c's warmup_cosine with eta_min = base / 10."""
    warmup = WARMUP if total > WARMUP else 1
    if t < warmup:
        return base * (t + 1) / warmup
    if t >= total:
        return base / 10
    return base / 10 + (base - base / 10) * (1 + math.cos(math.pi * (t - warmup) /
                                                          (total - warmup))) / 2


def batch_of(ids, starts, block=BLOCK):
    x = torch.from_numpy(np.stack([ids[s:s + block] for s in starts]))
    y = torch.from_numpy(np.stack([ids[s + 1:s + block + 1] for s in starts]))
    return x, y


def val_loss(model, ids, n_train):
    n_val = len(ids) - n_train
    starts = [n_train + k * VAL_STRIDE * BLOCK
              for k in range((n_val - BLOCK - 1) // (VAL_STRIDE * BLOCK) + 1)]
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(starts), 64):
            x, y = batch_of(ids, starts[i:i + 64])
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            total += loss.item() * len(x)
    model.train()
    return total / len(starts)


def train(a, vocab, ids, n_train):
    torch.manual_seed(a.seed)
    model = GPT(len(vocab), BLOCK, N_LAYER, N_HEAD, N_EMBD)
    opt = optimizer(model, a.lr)
    starts = window_starts(a.seed, n_train - BLOCK, a.steps * a.batch)
    losses, seconds = [], 0.0
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.lr, a.steps)
        x, y = batch_of(ids, starts[step * a.batch:(step + 1) * a.batch])
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        seconds += time.perf_counter() - t0
        losses.append(loss.item())
        if a.progress and (step + 1) % 50 == 0:
            print(f"step {step + 1}/{a.steps} loss {losses[-1]:.4f}", file=sys.stderr, flush=True)
    recent = losses[-20:]
    print(json.dumps({"recipe": "gpt", "framework": f"torch {torch.__version__}",
                      "steps": a.steps, "batch": a.batch, "block": BLOCK,
                      "train_loss": round(sum(recent) / len(recent), 4),
                      "val_loss": round(val_loss(model, ids, n_train), 4),
                      "train_tokens_per_s": round(a.steps * a.batch * BLOCK / seconds)}),
          flush=True)


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def bench(a, vocab, ids, n_train):
    """Tokens/s of training steps on a.device on windows of a.block characters (the recipe's
    model with that many positions), forward and loss under autocast to a.amp unless it is off
    (f16 with a grad scaler, unscaled before clipping): the median step after 3 warm-up steps (6
    compiled: compiling, recording the graphs), a step's time including copying its batch to the
    device and waiting for the device."""
    torch.manual_seed(0)
    model = GPT(len(vocab), a.block, N_LAYER, N_HEAD, N_EMBD).to(a.device)
    opt = optimizer(model, a.lr)
    run = torch.compile(model, mode="reduce-overhead") if a.compile else model
    warmup = 6 if a.compile else 3
    amp = {"off": None, "f16": torch.float16, "bf16": torch.bfloat16}[a.amp]
    scaler = torch.amp.GradScaler(a.device) if amp == torch.float16 else None
    starts = window_starts(a.seed, n_train - a.block, (a.steps + warmup) * a.batch)
    times = []
    for step in range(a.steps + warmup):
        x, y = batch_of(ids, starts[step * a.batch:(step + 1) * a.batch], a.block)
        synchronize(a.device)
        t0 = time.perf_counter()
        if a.compile:  # a new step for the graphs' outputs
            torch.compiler.cudagraph_mark_step_begin()
        x, y = x.to(a.device), y.to(a.device)
        with torch.autocast(a.device, dtype=amp, enabled=amp is not None):
            loss = F.cross_entropy(run(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        else:
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        synchronize(a.device)
        if step >= warmup:
            times.append(time.perf_counter() - t0)
    print(f"gpt_b{a.batch}_t{a.block} tokens_per_s "
          f"{a.batch * a.block / statistics.median(times):.0f}", flush=True)


# ---- sampling: `ember sample gpt` (models/gpt_generate.c) from ember's model file ----
def load_ember_model(path):
    """The GPT and vocabulary of a model file `ember train gpt --save` wrote (safetensors, read
    here with numpy): the model's tensors by their own names beside the optimizer's under
    'ember.'; a training checkpoint of version 1 prefixed the model's names with 'model.'."""
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        data = f.read()
    meta = header.pop("__metadata__")
    version_1 = meta.get("ember.kind") == "train_checkpoint" and \
        "ember.checkpoint_version" not in meta
    prefix = "model." if version_1 else ""
    state = {}
    for name, t in header.items():
        if name.startswith(prefix) and not name.startswith("ember.") and t["dtype"] == "F32":
            begin, end = t["data_offsets"]
            array = np.frombuffer(data[begin:end], np.float32).reshape(t["shape"])
            state[name[len(prefix):]] = torch.from_numpy(array.copy())
    model = GPT(len(meta["gpt.vocab"]), int(meta["gpt.block_size"]), int(meta["gpt.n_layer"]),
                int(meta["gpt.n_head"]), int(meta["gpt.n_embd"]))
    model.load_state_dict(state)
    return model.eval(), meta["gpt.vocab"]


def attend_cached(layer, x, cache, held):
    """One pre-LN block on the new positions x (1, t, E) after the `held` cached ones: their
    q/k/v from the block's in-projection, k/v written into the cache (2, 1, H, block, D)."""
    attn, t = layer.self_attn, x.shape[1]
    heads, width = attn.num_heads, x.shape[2]
    q, k, v = F.linear(layer.norm1(x), attn.in_proj_weight, attn.in_proj_bias).split(width, -1)
    q, k, v = (z.view(1, t, heads, width // heads).transpose(1, 2) for z in (q, k, v))
    cache[0, :, :, held:held + t] = k
    cache[1, :, :, held:held + t] = v
    mask = None if t == 1 else torch.ones(t, held + t, dtype=torch.bool).tril(held)
    y = F.scaled_dot_product_attention(q, cache[0, :, :, :held + t], cache[1, :, :, :held + t],
                                       attn_mask=mask)  # (1, H, t, D)
    x = x + attn.out_proj(y.transpose(1, 2).reshape(1, t, width))
    return x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))


def logits_cached(model, ids, caches, held):
    """The last position's logits (V) of ids (the positions after the `held` cached ones)."""
    x = model.wte(ids) + model.wpe(torch.arange(held, held + ids.shape[1]))
    for layer, cache in zip(model.h, caches):
        x = attend_cached(layer, x, cache, held)
    return F.linear(model.ln_f(x[:, -1]), model.wte.weight)[0]


def pick(logits, temperature, top_k, gen):
    """em_sample_logits: logits / temperature, the top k kept, one token drawn."""
    logits = logits / temperature
    if 0 < top_k < logits.shape[0]:
        logits = logits.masked_fill(logits < torch.topk(logits, top_k).values[-1], float("-inf"))
    return int(torch.multinomial(F.softmax(logits, -1), 1, generator=gen))


def generate(model, prompt, n_new, a, cached):
    """n_new tokens after prompt as em_gpt_generate makes them: with the cache, each step runs
    the positions not yet in it, and a full cache restarts from the context's last block / 2;
    without, the context's last block positions every step."""
    block = model.wpe.weight.shape[0]
    heads, width = model.h[0].self_attn.num_heads, model.wpe.weight.shape[1]
    caches = [torch.empty(2, 1, heads, block, width // heads) for _ in model.h]
    gen = torch.Generator().manual_seed(a.seed)
    ctx, in_cache, held = list(prompt), 0, 0
    while len(ctx) < len(prompt) + n_new:
        n = len(ctx)
        if not cached:
            logits = model(torch.tensor([ctx[max(0, n - block):]]))[0, -1]
        else:
            if n - in_cache > block:
                in_cache, held = n - (n if n <= block else max(block // 2, 1)), 0
            logits = logits_cached(model, torch.tensor([ctx[in_cache + held:]]), caches, held)
            held = n - in_cache
        ctx.append(pick(logits, a.temperature, a.top_k, gen))
    return ctx[len(prompt):]


def sample(a):
    model, vocab = load_ember_model(a.load)
    prompt = [vocab.index(c) for c in a.prompt]
    with torch.inference_mode():
        if a.text:
            out = generate(model, prompt, a.tokens, a, True)
            print("text " + json.dumps("".join(vocab[i] for i in out)), flush=True)
            return
        for cached in (True, False):
            generate(model, prompt, 8, a, cached)  # warm-up
        for cached, name in ((True, "cache"), (False, "no_cache")):
            t0 = time.perf_counter()
            generate(model, prompt, a.tokens, a, cached)
            print(f"{name} chars_per_s {a.tokens / (time.perf_counter() - t0):.1f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["train", "bench", "sample"])
    ap.add_argument("--data", default=FORTUNES)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--block", type=int, default=BLOCK)
    ap.add_argument("--lr", type=float, default=LR)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--amp", choices=["off", "f16", "bf16"], default="off",
                    help="bench: autocast dtype of the forward and loss")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="bench: where")
    ap.add_argument("--compile", action="store_true",
                    help='bench: the model under torch.compile(mode="reduce-overhead")')
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--load", help="sample: a model file of `ember train gpt --save`")
    ap.add_argument("--prompt", default="\n")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--text", action="store_true")
    a = ap.parse_args()
    a.steps = a.steps or (STEPS if a.mode == "train" else 20)
    torch.set_num_threads(a.threads)
    if a.mode == "sample":
        return sample(a)
    vocab, ids, n_train = load_text(a.data)
    if a.mode == "train":
        return train(a, vocab, ids, n_train)
    try:
        bench(a, vocab, ids, n_train)
    except Exception as e:  # the compiler's backends fail in many ways; say which
        if not a.compile:
            raise
        text = str(e).strip().splitlines()
        print(f"gpt_b{a.batch}_t{a.block}: this PyTorch cannot compile it: "
              f"{type(e).__name__}: {text[0] if text else ''}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
