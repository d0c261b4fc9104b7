#!/usr/bin/env python3
"""TCP goodput between two endpoints of an emulated fabric (perf/fabric/cable_goodput.py).

  tcp_flows.py recv PORT FLOWS          accepts FLOWS connections, reads until each closes,
                                        prints one JSON line: bytes and seconds per flow
  tcp_flows.py send ADDR PORT FLOWS SECONDS
                                        opens FLOWS connections and writes on each for SECONDS
Run each side inside its endpoint's namespace (`topocoll fabric exec`); measure() does both
from outside (perf/fabric/cable_goodput.py, perf/fabric/cable_check.py).
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

PORT = 5201


def receive(port, flows):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(flows)
    got = [0] * flows
    spans = [[0.0, 0.0] for _ in range(flows)]

    def read(i, conn):
        buf = memoryview(bytearray(1 << 20))
        while True:
            n = conn.recv_into(buf)
            if n == 0:
                break
            if got[i] == 0:
                spans[i][0] = time.monotonic()  # from the first byte: no connect time
            got[i] += n
        spans[i][1] = time.monotonic()
        conn.close()

    readers = []
    for i in range(flows):
        conn, _ = listener.accept()
        t = threading.Thread(target=read, args=(i, conn))
        t.start()
        readers.append(t)
    for t in readers:
        t.join()
    start = min(s[0] for s in spans)
    end = max(s[1] for s in spans)
    print(json.dumps({"bytes": got, "seconds": [s[1] - s[0] for s in spans],
                      "total_bytes": sum(got), "total_seconds": end - start}), flush=True)


def send(address, port, flows, seconds):
    chunk = b"\0" * (1 << 20)

    def write():
        s = socket.create_connection((address, port))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            s.sendall(chunk)
        s.close()

    writers = [threading.Thread(target=write) for _ in range(flows)]
    for t in writers:
        t.start()
    for t in writers:
        t.join()


def measure(cli, fabric, src, dst, address, flows, seconds, port=PORT):
    """Mbit/s of TCP from endpoint src to endpoint dst (its address) of the fabric, over `flows`
    connections for `seconds`, timed by the receiver from the first byte to the last."""
    me = os.path.abspath(__file__)
    recv = subprocess.Popen([cli, "fabric", "exec", "--name", fabric, dst, "--",
                             sys.executable, me, "recv", str(port), str(flows)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)  # the listener is up
        sent = subprocess.run([cli, "fabric", "exec", "--name", fabric, src, "--",
                               sys.executable, me, "send", address, str(port), str(flows), str(seconds)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if sent.returncode != 0:
            raise RuntimeError(f"sender in {src} failed ({sent.returncode}): {sent.stdout}")
        out, err = recv.communicate(timeout=seconds + 60)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    if recv.returncode != 0:
        raise RuntimeError(f"receiver in {dst} failed: {err}")
    r = json.loads(out.strip().splitlines()[-1])
    return r["total_bytes"] * 8 / r["total_seconds"] / 1e6


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "recv":
        receive(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) == 6 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)
