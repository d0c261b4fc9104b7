#!/usr/bin/env python3
"""Prints one hash of the sources a build is made from: every file git tracks or would track
(untracked files it does not ignore), by path and content, as they are in the working tree.

perf/gpu/prebuild.sh stamps the build it carries to the GPU machine with it, and run_all.sh
takes that build only where the hash is the same (perf/gpu/gpu_build.sh). Content, not git's
view of it: the device machine's copy of the tree has other stat data, may lose file modes,
and its git may be configured otherwise. perf/results/ is left out: records are written and
copied back there between calls, and no program is built from them.

    source_stamp.py ROOT
"""
import hashlib
import os
import subprocess
import sys

EXCLUDED_PREFIXES = ("perf/results/",)


def source_files(root):
    listing = subprocess.run(
        ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True).stdout
    paths = {p.decode("utf-8", "surrogateescape") for p in listing.split(b"\0") if p}
    return sorted(p for p in paths if not p.startswith(EXCLUDED_PREFIXES))


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
