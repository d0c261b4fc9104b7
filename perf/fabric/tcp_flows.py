#!/usr/bin/env python3
"""TCP goodput between two endpoints of an emulated fabric (perf/fabric/cable_goodput.py).

  tcp_flows.py recv PORT FLOWS          accepts FLOWS connections, reads until each closes,
                                        prints one JSON line: bytes and seconds per flow
  tcp_flows.py send ADDR PORT FLOWS SECONDS
                                        opens FLOWS connections and writes on each for SECONDS
Run each side inside its endpoint's namespace (`topocoll fabric exec`).
"""
import json
import socket
import sys
import threading
import time


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


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "recv":
        receive(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) == 6 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)
