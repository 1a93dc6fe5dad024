"""A bulk TCP sender and receiver to run inside lab hosts: measures what a shaped link really carries.

Run as ``python -m tensorfabric.lab.tcpbulk recv --port 5201 --bytes 50000000`` in one host and
``python -m tensorfabric.lab.tcpbulk send --to 198.18.0.2 --port 5201 --bytes 50000000`` in another. The
receiver prints one JSON line: bytes received, seconds from first to last byte, and the goodput in bits per
second (TCP payload only; every segment also carries 66 bytes of Ethernet, IP and TCP headers: 1448 payload
bytes per 1514-byte frame at MTU 1500, 8948 per 9014 at MTU 9000).
Every socket operation has a timeout, so a broken link ends the run instead of hanging it.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

__all__ = ["BulkResult", "main", "receive", "send"]

_CHUNK = 256 * 1024


@dataclass(frozen=True, slots=True)
class BulkResult:
    bytes: int
    seconds: float
    bps: float


def receive(port: int, nbytes: int, *, timeout_s: float = 60.0, bind: str = "0.0.0.0",
            clock: Callable[[], float] = time.monotonic) -> BulkResult:
    """Accept one connection on ``port`` and read ``nbytes`` (or until the sender closes)."""
    with socket.create_server((bind, port), reuse_port=False) as server:
        server.settimeout(timeout_s)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(timeout_s)
            buf = bytearray(_CHUNK)
            first = conn.recv_into(buf)
            start = clock()
            got = first
            while got < nbytes:
                n = conn.recv_into(buf)
                if n == 0:
                    break
                got += n
            elapsed = clock() - start
            conn.sendall(b"k")  # tell the sender everything arrived, so its clock agrees with ours
    # The first chunk arrived at `start`; the rate is over the bytes that came after it.
    return BulkResult(got, elapsed, (got - first) * 8 / elapsed if elapsed > 0 else 0.0)


def send(host: str, port: int, nbytes: int, *, timeout_s: float = 60.0, connect_tries: int = 100) -> BulkResult:
    """Connect to ``host:port`` (retrying while the receiver starts) and send ``nbytes``."""
    conn = None
    for _ in range(connect_tries):
        try:
            conn = socket.create_connection((host, port), timeout=timeout_s)
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    if conn is None:
        raise ConnectionRefusedError(f"nothing listens on {host}:{port}")
    payload = memoryview(bytes(_CHUNK))
    start = time.monotonic()
    with conn:
        sent = 0
        while sent < nbytes:
            sent += conn.send(payload[: min(_CHUNK, nbytes - sent)])
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)
    elapsed = time.monotonic() - start
    return BulkResult(sent, elapsed, sent * 8 / elapsed if elapsed > 0 else 0.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tensorfabric.lab.tcpbulk")
    parser.add_argument("mode", choices=["send", "recv"])
    parser.add_argument("--to", default="")
    parser.add_argument("--port", type=int, default=5201)
    parser.add_argument("--bytes", type=int, default=50_000_000)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.mode == "recv":
        result = receive(args.port, args.bytes, timeout_s=args.timeout)
    else:
        result = send(args.to, args.port, args.bytes, timeout_s=args.timeout)
    sys.stdout.write(json.dumps(asdict(result)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
