"""Which values are secrets, and the one masking of them. Names (is_secret_name): env variables
and headers whose literal values are masked when shown and never copied from an imported file
(${VAR} placeholders are not secrets: the value comes from the environment when the server is
used), and argument keys. Values: the environment's and a profile's (environment_secrets), a
call's secret arguments (argument_secrets), a URL's (url_secrets, mask_url). Masker masks them
wherever they appear: audit records, telemetry, the errors a call reports."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus, unquote_plus, urlsplit, urlunsplit

from llmc_cli.config.profiles import expand, has_placeholder
from llmc_cli.errors import ConfigError

if TYPE_CHECKING:
    from llmc_cli.config.schema import Profile

# A name holds a secret when one of its words says so. Words are split at anything that is not a
# letter or digit and at camelCase humps, so "apiKey", "API_KEY", "x-api-key" and "AccessKeyId"
# read alike, while "author", "keyboard", "monkey" and "compass" are not secrets.
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Stems that say "secret" wherever they stand in a word ("githubtoken", "dbpassword") ...
_SECRET_STEMS = ("token", "secret", "passw", "passphrase", "apikey", "credential", "cookie", "authori")
# ... and short words that say it only on their own ("pat" is a personal access token).
_SECRET_WORDS = frozenset(
    {"key", "keys", "pass", "pwd", "pat", "auth", "oauth", "jwt", "bearer", "private", "session", "sessions"}
)


@functools.lru_cache(maxsize=4096)  # asked for every key of every audit record: the same few names again and again
def is_secret_name(name: str) -> bool:
    """Does a field with this name usually hold a secret? The one rule for env variables and
    headers of a profile (masked when shown, never imported as literals), for argument and
    result keys in audit records, and for the environment variables whose values the audit masks."""
    for word in _WORDS.findall(name):
        word = word.lower()
        if word in _SECRET_WORDS or any(stem in word for stem in _SECRET_STEMS):
            return True
    return False


# Argument names is_secret_name found no secret in (Masker.flat_scalars): a batch's calls repeat a
# few names; a set's lookup, not the cached function's call. Bounded; only ever added to.
_PLAIN_NAMES: set[str] = set()


def shown_server(table: dict[str, Any]) -> dict[str, Any]:
    """A server table fit to print: literal values of secret-looking env/header names masked
    (${VAR} placeholders are not secrets and stay visible), and its URL's password and secret
    query values (mask_url)."""
    out = dict(table)
    for field in ("env", "headers"):
        if isinstance(out.get(field), dict):
            out[field] = {
                k: MASK if is_secret_name(k) and isinstance(v, str) and not has_placeholder(v) else v
                for k, v in out[field].items()
            }
    if isinstance(out.get("url"), str):
        out["url"] = mask_url(out["url"])
    return out


MASK = "***"
# A secret this long is masked wherever it stands, inside any text. A shorter one only where it
# stands as a word of its own (not next to a letter or digit): replacing every "abc" inside other
# words would garble the record and tell where the secret was. Under WORD_MIN characters a
# value is masked only where a whole string is that value (a one-letter "password" is no secret).
SUBSTRING_MIN = 6
WORD_MIN = 3


def _spellings(secret: str) -> set[str]:
    """The ways a quoted secret may read in text a server sends back: as it is, JSON-escaped (once
    inside a JSON string, twice inside JSON quoted in JSON) and URL-encoded."""

    forms = {secret}
    for ascii_only in (True, False):
        once = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        forms |= {once, json.dumps(once, ensure_ascii=ascii_only)[1:-1]}
    forms |= {quote(secret, safe=""), quote(secret), quote_plus(secret)}
    return forms


# Variables whose names read like secrets but whose values never are: PWD and OLDPWD ("pwd"), and
# the like. Their values (the working directory, ...) are everywhere in records: masked, every
# path would read "***/...", and a confirmation's `policy approve` command could not be run.
NOT_SECRET_VARIABLES = frozenset(
    {"PWD", "OLDPWD", "HOME", "USER", "LOGNAME", "USERNAME", "SHELL", "TERM", "LANG", "PATH", "SESSION_MANAGER",
     "XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_SESSION_DESKTOP", "DBUS_SESSION_BUS_ADDRESS",
     "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KRB5CCNAME", "DESKTOP_SESSION", "TERM_SESSION_ID"}
)  # fmt: skip
# Values that read like a word anyone may write (a mode, a flag): never masked inside text.
COMMON_VALUES = frozenset(
    {"true", "false", "yes", "no", "none", "null", "enabled", "disabled", "default", "production", "development",
     "staging", "localhost", "public", "private", "secret", "password", "token", "changeme", "example"}
)  # fmt: skip


def not_a_secret(value: str) -> bool:
    """A value the Masker never hides inside text, whoever says it is secret: a path (absolute
    or under ~), the working directory, the home directory, this user's name, a common word.
    (A value under a secret-looking key is still masked as a whole: that is by name.)"""
    import getpass

    if value.lower() in COMMON_VALUES or (value.startswith(("/", "~/")) and not any(c.isspace() for c in value)):
        return True
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = ""
    return value in {user, os.path.expanduser("~"), os.environ.get("PWD", ""), _cwd()}


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:
        return ""


class Masker:
    """The one masking of llmc (audit records, OpenTelemetry, messages): values under
    secret-looking keys become '***', and so does every spelling of every known secret value
    wherever it appears in a string (keys included, at any depth). Walks without recursion:
    the values are untrusted JSON of any depth. Immutable; `with_secrets` makes a wider one."""

    __slots__ = ("_pattern", "_whole", "secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets: frozenset[str] = frozenset(s for s in secrets if isinstance(s, str) and s and not not_a_secret(s))
        forms = {form for s in self.secrets for form in _spellings(s)}
        self._whole = frozenset(forms)
        long = sorted((f for f in forms if len(f) >= SUBSTRING_MIN), key=len, reverse=True)
        words = sorted((f for f in forms if WORD_MIN <= len(f) < SUBSTRING_MIN), key=len, reverse=True)
        alternatives = [re.escape(f) for f in long]
        alternatives += [rf"(?<![^\W_]){re.escape(f)}(?![^\W_])" for f in words]
        self._pattern = re.compile("|".join(alternatives)) if alternatives else None

    def with_secrets(self, more: Iterable[str]) -> Masker:
        added = {s for s in more if isinstance(s, str) and s and not not_a_secret(s)} - self.secrets
        return Masker(self.secrets | added) if added else self

    def with_arguments(self, arguments: object) -> Masker:
        """This masking, and the values of the secret-looking arguments of a call wherever they
        are quoted back (a server's error message, a result, a log line)."""
        found = argument_secrets(arguments)
        return self.with_secrets(found) if found else self  # (with_secrets of none: this one)

    def flat_arguments(self, arguments: object) -> dict[Any, Any] | None:
        """What `self.with_arguments(arguments)(arguments)` is for the arguments of most calls
        (one flat object without a secret-looking key, so no secret of their own): their masked
        copy, in one loop with `text` inline (a batch masks every call's arguments). None for
        any other: the caller takes the long way."""
        if type(arguments) is not dict:
            return None
        whole, pattern = self._whole, self._pattern
        out: dict[Any, Any] = {}
        for k, v in arguments.items():
            if isinstance(v, (dict, list, tuple)) or not isinstance(k, str) or is_secret_name(k):
                return None  # nested, a key that is no text, or a secret by name: with_arguments and the walk decide
            key = MASK if k in whole else pattern.sub(MASK, k) if pattern is not None else k
            if key in out:
                return None  # two keys masked alike (_masked_flat's case)
            out[key] = (MASK if v in whole else pattern.sub(MASK, v) if pattern is not None else v) if isinstance(v, str) else v
        return out

    def flat_scalars(self, arguments: object) -> dict[Any, Any] | None:
        """flat_arguments(arguments) where every value is text, an integer, a boolean or null
        (no float: the caller hashes them as they are encoded, model.canonical_json_bytes);
        None for any other. Types asked by identity, not isinstance (JSON's values are exactly
        these types; an isinstance of a tuple of three types was ~1,300 instructions), and each
        key judged by is_secret_name once per process."""
        if type(arguments) is not dict:
            return None
        whole, pattern, plain = self._whole, self._pattern, _PLAIN_NAMES
        out: dict[Any, Any] = {}
        for k, v in arguments.items():
            if k not in plain:  # (a str: only a str is added)
                if type(k) is not str or is_secret_name(k):
                    return None  # a key that is no text, or a secret by name: with_arguments and the walk decide
                if len(plain) < 4096:
                    plain.add(k)
            kind = type(v)
            if kind is str:
                if v in whole:
                    v = MASK
                elif pattern is not None:
                    v = pattern.sub(MASK, v)
            elif not (kind is int or kind is bool or v is None):
                return None  # nested, or a float: flat_arguments and the caller's checks decide
            if k in whole:
                k = MASK
            elif pattern is not None:
                k = pattern.sub(MASK, k)
            if k in out:
                return None  # two keys masked alike (_masked_flat's case)
            out[k] = v
        return out

    def text(self, value: str) -> str:
        if value in self._whole:
            return MASK
        return self._pattern.sub(MASK, value) if self._pattern is not None else value

    def spans(self, value: str) -> list[tuple[int, int]]:
        """Where the known secrets stand in a text (what `text` would mask), as (start, end)."""
        if value in self._whole:
            return [(0, len(value))]
        return [m.span() for m in self._pattern.finditer(value)] if self._pattern is not None else []

    def __call__(self, value: Any) -> Any:
        """A copy of a JSON-like value with every secret masked, and every value under a
        secret-looking key."""
        return self._walk(value, by_name=True)

    def strings(self, value: Any) -> Any:
        """A copy with every known secret masked wherever it appears, keys judged by what they
        contain only (OpenTelemetry attributes: "gen_ai.usage.input_tokens" names no secret)."""
        return self._walk(value, by_name=False)

    def _walk(self, value: Any, by_name: bool) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if not isinstance(value, (dict, list, tuple)):
            return value
        if isinstance(value, dict):
            flat = _masked_flat(self, value, by_name)  # most values masked are one flat object (arguments)
            if flat is not None:
                return flat
        root: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
        while stack:
            item, parent, slot = stack.pop()
            if isinstance(item, dict):
                out: Any = {}
                for k, v in item.items():
                    key = self.text(k) if isinstance(k, str) else k
                    if by_name and isinstance(k, str) and is_secret_name(k):
                        out[key] = MASK
                    else:
                        out[key] = None
                        stack.append((v, out, key))
            elif isinstance(item, (list, tuple)):
                out = [None] * len(item)
                stack.extend((v, out, i) for i, v in enumerate(item))
            elif isinstance(item, str):
                out = self.text(item)
            else:
                out = item
            parent[slot] = out
        return root[0]


# The last host identity masked (an audit record's "client", services/calls.py masked), the
# masker and the masked copy: a gateway session's calls carry the very same identity object (made
# once per handshake, only read) and, without secret arguments, the very same masker (immutable),
# so the copy is the same each time. Kept by identity, holding both: neither can be another object
# under a reused id. One tuple, replaced whole: threads read a consistent one.
_last_identity: tuple[object, Masker, object] | None = None


def masked_identity(identity: object, masker: Masker) -> object:
    """masker(identity), the same copy again while both are the very objects last masked."""
    global _last_identity
    known = _last_identity
    if known is not None and known[0] is identity and known[1] is masker:
        return known[2]
    out = masker(identity)
    _last_identity = (identity, masker, out)
    return out


def _masked_flat(masker: Masker, value: dict[Any, Any], by_name: bool) -> dict[Any, Any] | None:
    """What _walk makes of an object none of whose values is an object or array, in one loop
    without its stack; None for any other (the walk decides)."""
    text = masker.text
    out: dict[Any, Any] = {}
    for k, v in value.items():
        key = text(k) if isinstance(k, str) else k
        if isinstance(v, (dict, list, tuple)) or key in out:  # nested, or two keys masked alike
            return None
        out[key] = MASK if by_name and isinstance(k, str) and is_secret_name(k) else text(v) if isinstance(v, str) else v
    return out


def argument_secrets(arguments: object) -> set[str]:
    """The values under secret-looking keys of a call's arguments (every scalar inside one, as
    text), found without recursion."""
    found: set[str] = set()
    if type(arguments) is dict:  # most arguments are one flat object without such a key: one loop, no stack
        for k, v in arguments.items():
            if isinstance(v, (dict, list, tuple)) or (isinstance(k, str) and is_secret_name(k)):
                break  # the walk decides
        else:
            return found
    stack: list[tuple[object, bool]] = [(arguments, False)]
    while stack:
        item, secret = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, secret or (isinstance(k, str) and is_secret_name(k))) for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, secret) for v in item)
        elif secret and item is not None and not isinstance(item, bool):
            found.add(item if isinstance(item, str) else str(item))
    return found


_CONNINFO_PASSWORD = r"(\bpassword\s*=\s*)(?:'((?:[^'\\]|\\.)*)'|([^\s']+))"  # compiled (and cached) by re at first use


def url_secrets(url: str) -> set[str]:
    """The secret parts of a URL or a libpq conninfo string: the userinfo password and the
    values of secret-looking query parameters (as written and decoded), or a conninfo's `password=`."""

    if "://" not in url:
        return {m.group(2) or m.group(3) for m in re.finditer(_CONNINFO_PASSWORD, url) if m.group(2) or m.group(3)}
    try:
        parts = urlsplit(url)
        found = {parts.password, unquote_plus(parts.password)} if parts.password else set()
    except ValueError:
        return set()
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if value and is_secret_name(unquote_plus(name)):
            found |= {value, unquote_plus(value)}
    return found


def mask_url(url: str) -> str:
    """A URL (or a libpq conninfo string) fit to show: its userinfo password and the values of
    secret-looking query parameters as '***', everything else as written (${VAR}s included)."""

    if "://" not in url:
        return re.sub(_CONNINFO_PASSWORD, lambda m: m.group(1) + MASK, url)
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    netloc = parts.netloc
    if password and not has_placeholder(password):
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:{MASK}@{host}"
    pairs = []
    for pair in parts.query.split("&") if parts.query else []:
        name, _equals, value = pair.partition("=")
        secret = value and is_secret_name(unquote_plus(name)) and not has_placeholder(value)
        pairs.append(f"{name}={MASK}" if secret else pair)
    return urlunsplit((parts.scheme, netloc, parts.path, "&".join(pairs), parts.fragment))


def environment_secrets(profile: Profile | None = None) -> set[str]:
    """The secret values known outside a call's arguments: those of secret-looking environment
    variables (SUBSTRING_MIN characters or more: shorter ones are flags and ids, not secrets), and
    of a profile (config.schema.Profile): what its servers' secret-looking env and header entries
    hold (literal or expanded, and a header's credential after its scheme: "Bearer TOKEN"), the
    values of secret-looking ${VAR}s anywhere in them, and the passwords and secret query values
    of its URLs (servers and [state])."""

    found = {v for k, v in os.environ.items() if is_secret_name(k) and k not in NOT_SECRET_VARIABLES and len(v) >= SUBSTRING_MIN}
    if profile is None:
        return found

    def expanded(value: str) -> str | None:
        try:
            return expand(value, "")
        except ConfigError:  # an unset variable: nothing it could leak
            return None

    urls = [profile.state.url]
    for server in profile.servers.values():
        urls.append(server.url)
        for table in (server.env, server.headers):
            for name, value in table.items():
                if not isinstance(value, str):
                    continue
                found |= {os.environ[v] for v in re.findall(_PLACEHOLDER_NAMES, value) if is_secret_name(v) and v in os.environ}
                text = expanded(value)
                if text and is_secret_name(name):
                    found |= {text, text.split()[-1]} if text.split() else {text}
    for url in urls:
        text = expanded(url) if url else None
        if text:
            found |= url_secrets(text)
    return {s for s in found if s}


_PLACEHOLDER_NAMES = r"\$\{([A-Za-z_][A-Za-z0-9_]*)"  # compiled (and cached) by re at first use
