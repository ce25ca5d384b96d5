"""GET /status of a gateway with several workers (forward.py): the worker that gets it answers
with the sessions of every worker, each host tagged with its `worker`, asking the others over
their private sockets with the same request (so each one applies the same principal's view).
`profiles` (the upstream servers) are the answering worker's own: each worker runs its own
upstream connections. A worker that cannot be asked (restarting) is named in `workersMissing`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httptools

from llmc_cli.gateway.forward import READ_BYTES, App, Receive, Reply, Send, WorkerSlot, request_head

ASK_SECONDS = 5.0


def gather_status(app: App, slot: WorkerSlot) -> App:
    """The app that answers GET /status on the public socket of worker `slot`."""

    async def status(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        code, headers, body = await _local(app, scope)
        if code != 200:
            await _send(send, code, headers, body)
            return
        merged = json.loads(body)
        hosts = [{**host, "worker": slot.index} for host in merged.get("hosts", [])]
        missing: list[int] = []
        others = [index for index in range(slot.count) if index != slot.index]
        answers = await asyncio.gather(*(_ask_worker(slot.socket_path(index), scope) for index in others))
        for index, answer in zip(others, answers, strict=True):
            if answer is None:
                missing.append(index)
                continue
            hosts.extend({**host, "worker": index} for host in answer.get("hosts", []) if isinstance(host, dict))
        hosts.sort(key=lambda host: str(host.get("opened", "")))
        merged.update(sessions=len(hosts), hosts=hosts, workers=slot.count, workersMissing=missing)
        data = json.dumps(merged, ensure_ascii=False).encode("utf-8")
        kept = [(n, v) for n, v in headers if n != b"content-length"]
        await _send(send, 200, [*kept, (b"content-length", str(len(data)).encode())], data)

    return status


async def _local(app: App, scope: dict[str, Any]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """This worker's own answer, captured."""
    code = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def capture(message: dict[str, Any]) -> None:
        nonlocal code, headers
        if message["type"] == "http.response.start":
            code, headers = message["status"], list(message.get("headers", []))
        else:
            chunks.append(message.get("body", b""))

    await app(scope, receive, capture)
    return code, headers, b"".join(chunks)


async def _ask_worker(path: str, scope: dict[str, Any]) -> dict[str, Any] | None:
    """Another worker's /status for the same request; None when it cannot answer."""
    try:
        async with asyncio.timeout(ASK_SECONDS):
            reader, writer = await asyncio.open_unix_connection(path)
            try:
                writer.write(request_head(scope, 0))
                reply = Reply()
                parser = httptools.HttpResponseParser(reply)
                while not reply.complete:
                    data = await reader.read(READ_BYTES)
                    if not data:
                        return None
                    parser.feed_data(data)
            finally:
                writer.close()
    except (OSError, TimeoutError, httptools.HttpParserError):
        return None
    if parser.get_status_code() != 200:
        return None
    try:
        answer = json.loads(b"".join(reply.body))
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


async def _send(send: Send, code: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
