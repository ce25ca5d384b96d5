"""What a stdio server's process is given besides its command: its environment (an allow-list
of the user's variables plus what the server's description declares: never the user's whole
environment, which holds tokens for unrelated services) and whether it gets a session of its own.
"""

from __future__ import annotations

import os

# Variables a server legitimately needs to start (the MCP SDKs pass a similar list).
INHERITED_ENV = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "SYSTEMROOT",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "npm_config_cache",
    "VIRTUAL_ENV",
    "PYTHONPATH",
)


def child_environment(declared: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(declared)
    return env


def has_terminal() -> bool:
    """Whether this process has a controlling terminal (which a server left in its session could
    open). No: a pipe, a cron job, CI, a service."""
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY))
    except OSError:
        return False
    return True
