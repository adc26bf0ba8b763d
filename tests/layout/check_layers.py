#!/usr/bin/env python3
"""The layering rule, checked: a source file includes ember headers of its own folder's layer or a
lower one, never a higher one. The ranks are the README's layout table, bottom up; folders on
one rank may include each other. The programs (recipes/ and up) are users of the library: their
files, sources and headers alike, include only its public headers (ember.h and what it reaches),
never a private one.
Usage: check_layers.py SOURCE_DIR (exit 1 naming each breach)."""
import os
import re
import sys

LIBRARY = [["backend"], ["backend_cpu", "backend_cuda"], ["tensor"], ["io"], ["observe"],
           ["autograd"], ["data"], ["nn"], ["optim", "quant", "prune", "export"], ["models"],
           ["train", "serve", "distributed"]]
# recipes: the reference recipes and their driver; http: the HTTP front; cmd: what bench and
# cli share (argument parsing, the recipe operand, the report); bench: the benchmarks; cli: the
# `ember` command's subcommands
PROGRAMS = [["recipes", "http"], ["cmd"], ["bench"], ["cli"]]
RANKS = LIBRARY + PROGRAMS
RANK = {folder: i for i, row in enumerate(RANKS) for folder in row}
LIBRARY_FOLDERS = {folder for row in LIBRARY for folder in row}
PROGRAM_FOLDERS = {folder for row in PROGRAMS for folder in row}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(?:ember/)?(([a-z_]+)/[^"]+)"', re.M)


def includes(root, path):
    """The ember headers path includes, as (folder/file, folder)."""
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def public_headers(root):
    """ember.h's headers and every one they include in turn."""
    seen, unread = set(), ["ember.h"]
    while unread:
        for header, folder in includes(root, unread.pop()):
            if folder in LIBRARY_FOLDERS and header not in seen:
                seen.add(header)
                unread.append(header)
    return seen


def breaches(root):
    public = public_headers(root)
    for folder, rank in RANK.items():
        path = os.path.join(root, folder)
        if not os.path.isdir(path):
            yield f"{folder}/: folder named in the layer ranks is missing"
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            for header, target in includes(root, os.path.join(folder, name)):
                if target in RANK and RANK[target] > rank:
                    yield f"{folder}/{name} includes {target}/ (a higher layer)"
                if folder in PROGRAM_FOLDERS and target in LIBRARY_FOLDERS and header not in public:
                    yield f"{folder}/{name} includes {header} (not a public header)"


def main():
    found = list(breaches(sys.argv[1]))
    for line in found:
        print(line)
    print(f"layers: {len(found)} breach(es) in {len(RANK)} folders")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
