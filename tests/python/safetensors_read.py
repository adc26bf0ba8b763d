"""Reads a safetensors file with the Python safetensors library (numpy) and prints, sorted by
name, each tensor's name, shape and sum, then whether the metadata holds 'ember.model'.
Usage: safetensors_read.py FILE"""
import sys

from safetensors import safe_open


def main():
    with safe_open(sys.argv[1], framework="numpy") as f:
        for name in sorted(f.keys()):
            t = f.get_tensor(name)
            print(f"{name} {list(t.shape)} {float(t.astype('float64').sum()):.6f}")
        meta = f.metadata() or {}
        print("ember.model" in meta and meta["ember.model"].startswith("{") and "tree" or "no tree")


if __name__ == "__main__":
    main()
