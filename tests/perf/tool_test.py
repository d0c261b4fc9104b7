"""What the tests of perf/'s scripts share: run a script, fail with its output."""
import subprocess
import sys


def run_tool(tool, *args):
    """(exit status, stdout + stderr) of `python3 tool args...`."""
    p = subprocess.run([sys.executable, tool, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout + p.stderr


def check(cond, what, out):
    if not cond:
        print(f"FAIL: {what}\n{out}")
        sys.exit(1)
