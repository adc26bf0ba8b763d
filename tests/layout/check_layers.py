#!/usr/bin/env python3
"""The layering rule, checked: a source file includes ember headers of its own folder's layer or a
lower one, never a higher one. The ranks are the README's layout table, bottom up; folders on
one rank may include each other. Usage: check_layers.py SOURCE_DIR (exit 1 naming each breach)."""
import os
import re
import sys

RANKS = [["backend"], ["backend_cpu", "backend_cuda"], ["tensor"], ["io"], ["observe"],
         ["autograd"], ["data"], ["nn"], ["optim", "quant", "prune", "export"], ["models"],
         ["train", "serve", "dist"], ["recipes"], ["cli", "bench"]]
RANK = {folder: i for i, row in enumerate(RANKS) for folder in row}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(?:ember/)?([a-z_]+)/[^"]+"', re.M)


def breaches(root):
    for folder, rank in RANK.items():
        path = os.path.join(root, folder)
        if not os.path.isdir(path):
            yield f"{folder}/: folder named in the layer ranks is missing"
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            with open(os.path.join(path, name), encoding="utf-8") as f:
                for target in INCLUDE.findall(f.read()):
                    if target in RANK and RANK[target] > rank:
                        yield f"{folder}/{name} includes {target}/ (a higher layer)"


def main():
    found = list(breaches(sys.argv[1]))
    for line in found:
        print(line)
    print(f"layers: {len(found)} breach(es) in {len(RANK)} folders")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
