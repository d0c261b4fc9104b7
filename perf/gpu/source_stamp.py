#!/usr/bin/env python3
"""Prints one hash of the sources a build is made from: every file git tracks or would track
(untracked files it does not ignore), by path and content, as they are in the working tree,
less the files no build reads (is_source).

perf/gpu/prebuild.sh stamps the build it carries to the GPU machine with it, and run_all.sh
takes that build only where the hash is the same (perf/gpu/gpu_build.sh's prebuilt_stamp, the
one rule both use). Content, not git's view of it: the device machine's copy of the tree has
other stat data, may lose file modes, and its git may be configured otherwise.

    source_stamp.py ROOT
"""
import hashlib
import os
import subprocess
import sys

# Not compiled and not read by CMake, so an edit to them must not cost the GPU machine a
# rebuild (~90-130 s of 15 minutes of GPU time): records (written and copied back between calls),
# documentation, and the GPU run scripts themselves (perf/gpu/*.sh, *.py: they run from the
# tree, the build holds no copy). Tests that read docs or these scripts read them from the
# source tree at test time, not from the build.
EXCLUDED_PREFIXES = ("perf/results/", "docs/")
EXCLUDED_SUFFIXES = (".md",)
SCRIPT_DIR = "perf/gpu/"
SCRIPT_SUFFIXES = (".sh", ".py")


def is_source(path):
    """Whether a build can depend on PATH (relative to the root, '/'-separated)."""
    if path.startswith(EXCLUDED_PREFIXES) or path.endswith(EXCLUDED_SUFFIXES):
        return False
    if path.startswith(SCRIPT_DIR) and "/" not in path[len(SCRIPT_DIR):] and path.endswith(SCRIPT_SUFFIXES):
        return False
    return True


def source_files(root):
    listing = subprocess.run(
        ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True).stdout
    paths = {p.decode("utf-8", "surrogateescape") for p in listing.split(b"\0") if p}
    return sorted(p for p in paths if is_source(p))


def stamp(root):
    total = hashlib.sha256()
    for path in source_files(root):
        full = os.path.join(root, path)
        if os.path.islink(full):
            kind, data = b"link", os.readlink(full).encode("utf-8", "surrogateescape")
        elif os.path.isfile(full):
            with open(full, "rb") as f:
                kind, data = b"file", f.read()
        else:
            continue  # deleted in the work tree (or a nested repository): not a source here
        total.update(path.encode("utf-8", "surrogateescape") + b"\0" + kind + b"\0")
        total.update(hashlib.sha256(data).digest())
    return total.hexdigest()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: source_stamp.py ROOT")
    try:
        print(stamp(sys.argv[1]))
    except subprocess.CalledProcessError as e:
        sys.exit("source_stamp.py: git could not list the files of %s: %s"
                 % (sys.argv[1], e.stderr.decode(errors="replace").strip()))
    except OSError as e:
        sys.exit("source_stamp.py: %s" % e)


if __name__ == "__main__":
    main()
