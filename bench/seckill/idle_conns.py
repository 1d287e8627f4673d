#!/usr/bin/python3
# idle_conns.py: opens N keep-alive HTTP connections to seckilld, makes one
# GET /ping on each (so every connection is accepted and served), leaves
# them all open and idle, then reads the server's VmRSS from
# /proc/<pid>/status. Prints one CSV line; exits non-zero unless all N
# connections got 200 and were still open when the RSS was read.
# usage: idle_conns.py HOST PORT N SERVER_PID   (raise ulimit -n first)
import socket
import sys
import time


def vm_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


def fd_count(pid):
    import os
    return len(os.listdir("/proc/%d/fd" % pid))


def ping(s):
    s.sendall(b"GET /ping HTTP/1.1\r\nHost: bench\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return False
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            need = int(line.split(b":")[1])
            while len(body) < need:
                chunk = s.recv(4096)
                if not chunk:
                    return False
                body += chunk
    return True


def main():
    if len(sys.argv) != 5:
        sys.stderr.write("usage: idle_conns.py HOST PORT N SERVER_PID\n")
        return 2
    host, port, n, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rss0 = vm_rss_kib(pid)
    fds0 = fd_count(pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port), timeout=10)
        if not ping(s):
            sys.stderr.write("idle_conns: connection %d was not answered 200\n" % len(socks))
            return 1
        socks.append(s)
    time.sleep(1.0)  # let the server settle (buffers freed after the answers)
    rss = vm_rss_kib(pid)
    fds = fd_count(pid)
    # still open? a server that dropped them would show EOF on a ping
    alive = sum(1 for s in socks[:: max(1, n // 100)] if ping(s))
    sampled = len(socks[:: max(1, n // 100)])
    print("connections,rss_before_kib,rss_kib,rss_mib,server_fds_before,server_fds,sampled_alive")
    print("%d,%d,%d,%.1f,%d,%d,%d/%d" % (n, rss0, rss, rss / 1024.0, fds0, fds, alive, sampled))
    for s in socks:
        s.close()
    return 0 if alive == sampled and fds - fds0 >= n else 1


if __name__ == "__main__":
    sys.exit(main())
