"""Resource URIs as [policy.resources] judges them: normalised as RFC 3986 section 6.2.2 says
(percent-encoding normalisation of unreserved characters, upper-case hex, dot-segment removal
for hierarchical URIs, section 5.2.4), with empty segments ("//") collapsed as a file system
reads them. A glob over `server.URI` must not be escaped with `../`, `%2e%2e` or `//../`.

What cannot be normalised without guessing how the server will read it is refused (deny by
default): an invalid percent escape, an encoded "/", "\\" or NUL, an encoded dot that makes a
dot segment ("%2e%2e" changes the path only once the server decodes it), a dot segment written
with "\\" (a Windows server's separator), a dot segment that climbs above the path's root (RFC
3986 would stop there; a server that reads `lib://public/..` as a directory would not)."""

from __future__ import annotations

import re

UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class Unnormalisable(ValueError):
    """The URI cannot be judged as the server would read it (the reason is the message)."""


def normalise(uri: str) -> str:
    """The URI in normal form (see the module's docstring); Unnormalisable when it has none."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", uri):
        raise Unnormalisable("an invalid percent escape")
    if "\0" in uri:
        raise Unnormalisable("a NUL character")
    match = _SCHEME.match(uri)
    scheme, rest = (uri[: match.end()].lower(), uri[match.end() :]) if match else ("", uri)
    tail = ""
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    if cut >= 0:
        rest, tail = rest[:cut], rest[cut:]
    authority = ""
    if rest.startswith("//"):
        end = rest.find("/", 2)
        authority, rest = (rest, "") if end < 0 else (rest[:end], rest[end:])
    return scheme + _decode_escapes(authority) + _path(rest) + _decode_escapes(tail)


def _decode_escapes(text: str) -> str:
    """Unreserved characters decoded, other escapes in upper case; an encoded separator or NUL refused."""

    def one(m: re.Match[str]) -> str:
        char = chr(int(m.group(1), 16))
        if char in "/\\\0":
            raise Unnormalisable(f"an encoded {'NUL' if char == chr(0) else repr(char)}")
        return char if char in UNRESERVED else "%" + m.group(1).upper()

    return _ESCAPE.sub(one, text)


def _path(path: str) -> str:
    if not path:
        return path
    raw_segments = path.split("/")
    for raw in raw_segments:
        decoded = _decode_escapes(raw)
        if decoded in (".", "..") and decoded != raw:
            raise Unnormalisable("an encoded dot segment")
        if "\\" in decoded and any(part in (".", "..") for part in re.split(r"\\", decoded)):
            raise Unnormalisable("a dot segment written with a backslash")
    absolute = path.startswith("/")
    out: list[str] = []
    segments = [_decode_escapes(s) for s in raw_segments]
    for segment in segments:
        if segment in ("", "."):
            continue  # "//" read as "/", as a file system does; "." is this directory
        if segment == "..":
            if not out:  # RFC 3986 stops at the root; a server that reads the authority as a
                raise Unnormalisable("a dot segment above the root")  # directory (lib://public/..) would not
            out.pop()
            continue
        out.append(segment)
    trailing = "/" if segments[-1] in ("", ".", "..") and out else ""
    return ("/" if absolute else "") + "/".join(out) + trailing
