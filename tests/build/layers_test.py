#!/usr/bin/env python3
"""The include graph follows docs/ARCHITECTURE.md's layers: a layer includes only the layers
listed before it in the "Layers" block (config/ first, tools/ last), never one after it, and
perf/ and tests/ sit on top. Fails naming every file and include that runs the wrong way, or
a layer directory the block does not list."""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
doc = open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
block = doc.split("## Layers", 1)[1].split("```", 2)[1]
order = [m.group(1) for m in re.finditer(r"^ ([a-z_]+)/ ", block, re.M)]
if len(order) < 5:
    sys.exit(f"layers_test: could not read the layer list from docs/ARCHITECTURE.md (got {order})")
rank = {name: i for i, name in enumerate(order)}

problems = []
for layer in os.listdir(root):
    path = os.path.join(root, layer)
    if not os.path.isdir(path) or layer.startswith(".") or layer in rank:
        continue
    has_sources = any(re.search(r"\.(h|cpp|cu|cuh)$", f) for _, _, files in os.walk(path) for f in files)
    if has_sources and layer not in ("tests", "perf", "cmake", "examples", "docs", "build") and \
            not layer.startswith("build"):
        problems.append(f"{layer}/ holds sources but is not a layer of docs/ARCHITECTURE.md")

include = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
for layer in order:
    for directory, _, files in os.walk(os.path.join(root, layer)):
        for name in files:
            if not re.search(r"\.(h|cpp|cu|cuh)$", name):
                continue
            file = os.path.join(directory, name)
            for number, line in enumerate(open(file, encoding="utf-8", errors="replace"), 1):
                m = include.match(line)
                if not m or m.group(1) == layer or m.group(1) not in rank:
                    continue
                if rank[m.group(1)] > rank[layer]:
                    problems.append(f"{os.path.relpath(file, root)}:{number} includes {m.group(1)}/, "
                                    f"a layer above {layer}/")

for p in problems:
    print(p)
print(f"layers: {' < '.join(order)}; {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
