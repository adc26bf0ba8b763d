#!/usr/bin/env python3
"""The documentation a clone carries, checked. Fails (exit 1, a line per breach) when:
  - a file of the repository points outside it: a path through a parent folder that leaves the
    repository or names nothing, or an absolute path into the folders holding the checkout;
  - a link of README.md or docs/*.md leads nowhere: a file that is not there, or an anchor that
    is no heading of the page it names;
  - a file named in their code spans (`nn/nn.h`, `tests/layout/`) is not in the repository;
  - docs/architecture.md's layer picture is not the ranks of tests/layout/check_layers.py, top to
    bottom, or its folder table misses a folder of those ranks or names one that is not there;
  - the C blocks of docs/guide.md, in order, are not examples/first_training.c.
Usage: check_docs.py SOURCE_DIR"""
import glob
import importlib.util
import os
import re
import subprocess
import sys

# A path through parent folders: "../x/y.h", "../.." (resolved from the folder of its file).
PARENT_PATH = re.compile(r"(?<![\w.])((?:\.\./)+[\w.-]*(?:/[\w.-]+)*)")
# Parent paths that are not relative to their file's folder, with what they are relative to.
NOT_FROM_HERE = {
    ("cmake/ember.pc.in", "../.."): "the installed ember.pc's folder (the install prefix)",
    ("tests/fuzz/fuzz_image_folder.c", "../c1"): "the image folder the fuzz input makes",
}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
PATH_WORD = re.compile(r"(?<![\w./<>$*-])((?:[\w.*-]+/)+[\w.*-]*)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def repo_files(root):
    """The repository's files, relative to root: git's list in a checkout, else a walk that
    leaves out build folders and hidden ones."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                             check=True).stdout
        return sorted(f for f in out.decode().split("\0") if f and os.path.isfile(
            os.path.join(root, f)))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
            found += [os.path.relpath(os.path.join(d, f), root) for f in files]
        return sorted(found)


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def outside_paths(root, files):
    """Every file but this one, which names the paths it looks for."""
    real_root = os.path.realpath(root)
    holders = {os.path.dirname(real_root) + "/", "/work/"} - {"//"}
    itself = os.path.relpath(os.path.realpath(__file__), real_root)
    for rel in files:
        text = None if rel == itself else read_text(os.path.join(root, rel))
        if text is None:
            continue
        for n, line in enumerate(text.split("\n"), 1):
            for holder in holders:
                if holder in line:
                    yield f"{rel}:{n}: names a folder outside the repository: {holder}"
            for path in PARENT_PATH.findall(line):
                if (rel, path) in NOT_FROM_HERE:
                    continue
                target = os.path.normpath(os.path.join(real_root, os.path.dirname(rel), path))
                if os.path.commonpath([real_root, target]) != real_root:
                    yield f"{rel}:{n}: {path} points outside the repository"
                elif not os.path.exists(target):
                    yield f"{rel}:{n}: {path} names nothing in the repository"


def slug(heading):
    """The anchor a Markdown renderer (GitHub's) gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text):
    seen, found = {}, set()
    for heading in re.findall(r"^#+ (.*)$", prose(text), re.M):
        s = slug(heading)
        found.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return found


def prose(text):
    """text without its fenced code blocks."""
    return FENCE.sub("", text)


def broken_links(root, pages, top_folders):
    for rel in pages:
        text = read_text(os.path.join(root, rel))
        here = os.path.dirname(rel)
        for target in LINK.findall(prose(text)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(here, path)) if path else rel
            if not os.path.exists(os.path.join(root, dest)):
                yield f"{rel}: link to {target}: {dest} is not in the repository"
            elif frag and dest.endswith(".md"):
                if frag not in anchors(read_text(os.path.join(root, dest))):
                    yield f"{rel}: link to {target}: {dest} has no heading #{frag}"
        for span in CODE_SPAN.findall(prose(text)):
            for word in PATH_WORD.findall(span):
                if word.split("/")[0] in top_folders and not glob.glob(os.path.join(root, word)):
                    yield f"{rel}: `{span}` names {word}, which is not in the repository"


def layer_ranks(root):
    spec = importlib.util.spec_from_file_location(
        "check_layers", os.path.join(root, "tests", "layout", "check_layers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RANKS


def architecture(root, ranks):
    page = "docs/architecture.md"
    text = read_text(os.path.join(root, page))
    section = text[text.index("## Layers"):]
    picture = FENCE.search(section)[2]
    drawn = [re.findall(r"([a-z_]+)/", re.match(r"((?:[a-z_]+/ +)+)", line)[1])
             for line in picture.split("\n") if re.match(r"[a-z_]+/ ", line)]
    if drawn != [sorted(r, key=r.index) for r in reversed(ranks)]:
        yield (f"{page}: the layer picture draws {drawn}; tests/layout/check_layers.py's ranks, "
               f"top to bottom, are {list(reversed(ranks))}")
    rows = re.findall(r"^\| `([\w]+)/` \|", text, re.M)
    for folder in sorted({f for r in ranks for f in r} - set(rows)):
        yield f"{page}: the folder table has no row for {folder}/"
    for folder in rows:
        if not os.path.isdir(os.path.join(root, folder)):
            yield f"{page}: the folder table's {folder}/ is not in the repository"


def guide(root):
    page, program = "docs/guide.md", "examples/first_training.c"
    blocks = [body for lang, body in FENCE.findall(read_text(os.path.join(root, page)))
              if lang == "c"]
    shown = [line for line in "".join(blocks).split("\n") if line.strip()]
    source = [line for line in read_text(os.path.join(root, program)).split("\n") if line.strip()]
    if shown != source:
        n = next((i for i, (a, b) in enumerate(zip(shown, source)) if a != b),
                 min(len(shown), len(source)))
        yield (f"{page}: its C blocks differ from {program} at the program's non-blank line "
               f"{n + 1}: {shown[n] if n < len(shown) else '(end)'!r} against "
               f"{source[n] if n < len(source) else '(end)'!r}")


def main():
    root = sys.argv[1]
    files = repo_files(root)
    pages = ["README.md"] + [f for f in files if re.fullmatch(r"docs/[^/]+\.md", f)]
    top_folders = {f.split("/")[0] for f in files if "/" in f}
    found = list(outside_paths(root, files))
    found += broken_links(root, pages, top_folders)
    found += architecture(root, layer_ranks(root))
    found += guide(root)
    for line in found:
        print(line)
    print(f"docs: {len(found)} breach(es) in {len(files)} files and {len(pages)} pages")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
