"""CPU per MCP request on loopback of llmc's HTTP wire (llmc_cli/mcp/transports/http11.py:
httpx2 over a socket and llhttp) against httpx2's own transport (httpcore2 + h11) and
`http.client` alone (the floor), in one run: the same POST, the same reply, one kept-alive
connection each, the client thread's CPU (time.thread_time) over N requests.

    .venv/bin/python bench/http_wire_bench.py [--requests 3000] [--chunked]

The server is a thread of this process answering every request with one fixed reply
(Content-Length, or one chunk with --chunked as an SSE answer comes); its CPU is not counted.
"""

from __future__ import annotations

import argparse
import http.client
import socket
import ssl
import statistics
import threading
import time
from typing import Callable

BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"isError":false}}'
REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'


def reply(chunked: bool) -> bytes:
    if chunked:
        event = b"event: message\ndata: %s\n\n" % BODY
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event))
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nServer: bench\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY))


def serve(listener: socket.socket, answer: bytes) -> None:
    """Answer each request (head, then Content-Length bytes of body) on each connection."""

    def one(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = b""
        with conn:
            while data := conn.recv(65536):
                buffer += data
                while b"\r\n\r\n" in buffer:
                    head, _, rest = buffer.partition(b"\r\n\r\n")
                    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length:"))
                    if len(rest) < length:
                        break
                    buffer = rest[length:]
                    conn.sendall(answer)

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=one, args=(conn,), daemon=True).start()


def cpu_per_request(post: Callable[[], bytes], requests: int) -> float:
    for _ in range(200):  # warm
        post()
    started = time.thread_time()
    for _ in range(requests):
        post()
    return (time.thread_time() - started) / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunked", action="store_true")
    args = parser.parse_args()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    threading.Thread(target=serve, args=(listener, reply(args.chunked)), daemon=True).start()
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    import httpx2

    from llmc_cli.mcp.transports.http11 import Http11Transport

    llmc = httpx2.Client(transport=Http11Transport(ssl.create_default_context()))
    h11 = httpx2.Client()
    floor = http.client.HTTPConnection("127.0.0.1", port)

    def stdlib() -> bytes:
        floor.request("POST", "/mcp", REQUEST, headers)
        return floor.getresponse().read()

    clients: dict[str, Callable[[], bytes]] = {
        "llmc (httpx2 + llhttp)": lambda: llmc.post(url, content=REQUEST, headers=headers).read(),
        "httpx2 (httpcore2 + h11)": lambda: h11.post(url, content=REQUEST, headers=headers).read(),
        "http.client (floor)": stdlib,
    }
    seen: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(args.rounds):  # alternating, so that drift in the machine's speed hits each alike
        for name, post in clients.items():
            seen[name].append(cpu_per_request(post, args.requests))
    floor_us = statistics.median(seen["http.client (floor)"])
    print(f"{args.requests} requests x {args.rounds} rounds, {'chunked' if args.chunked else 'Content-Length'} "
          f"replies: client CPU per request (median)")
    for name, values in seen.items():
        median = statistics.median(values)
        print(f"  {name}: {median:.0f} us ({median / floor_us:.2f}x the floor)")


if __name__ == "__main__":
    main()
