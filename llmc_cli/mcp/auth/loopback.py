"""The redirect listener of the authorization code flow: 127.0.0.1 only, the first request to
/callback is the answer; or the address a person pastes (a browser on another machine)."""

from __future__ import annotations

import queue
import sys
import threading
from urllib.parse import parse_qsl, urlsplit

from llmc_cli.errors import AuthError


class LoopbackListener:
    """The redirect listener on 127.0.0.1: it takes the first request to /callback."""

    def __init__(self, port: int) -> None:
        from http.server import BaseHTTPRequestHandler, HTTPServer

        replies: queue.Queue[dict[str, str]] = queue.Queue()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path != "/callback":
                    self.send_error(404)
                    return
                replies.put(dict(parse_qsl(parts.query)))
                page = b"<!doctype html><title>llmc</title><p>llmc received the authorization. You can close this tab.</p>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args: object) -> None:
                pass  # the request line carries the authorization code: never log it

        self.replies = replies
        self.server = HTTPServer(("127.0.0.1", port), Handler)
        self.redirect_uri = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def wait(self, timeout: float, paste: bool) -> dict[str, str]:
        if paste:

            def read_pasted() -> None:
                line = sys.stdin.readline().strip()
                if line:
                    self.replies.put(dict(parse_qsl(urlsplit(line).query or line)))

            threading.Thread(target=read_pasted, daemon=True).start()
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            raise AuthError(f"no authorization response within {timeout:.0f} s") from None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
