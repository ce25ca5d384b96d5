"""An ad-hoc server's name is worked out with string methods (cli/targets.py) and a servers.json
key checked the same way (store/era_cache.py is_key): each must say what the regular expression
it replaced says, for any text, newlines and non-ASCII digits included."""

from __future__ import annotations

import itertools
import random
import re

from llmc_cli.cli import targets
from llmc_cli.store.era_cache import is_key

PIECES = [
    "a",
    "Z",
    "0",
    "9",
    "_",
    "-",
    ".",
    "@",
    "=",
    ">",
    "<",
    "~",
    "/",
    " ",
    "\n",
    "é",
    "٣",
    "²",
    "js",
    "py",
    "mjs",
    "mts",
    "cjs",
    "ts",
    "rb",
    "php",
    "jar",
    "index",
    "python3.12",
    "==1.2",
    "~=",
    "%",
    "x",
]


def texts(count: int) -> list[str]:
    rng = random.Random(34)
    made = [
        "",
        "\n",
        "a\n",
        "python3.12",
        "python3.12\n",
        "node",
        "pkg@1.2.3",
        "@scope/pkg@2",
        "\n@x",
        "a.py\n",
        "x.mjs",
        "x..js",
        "a-%b",
        "--a--",
        "index.js",
        "main",
        "٣.",
        "a.b_c",
        "a.",
        ".js",
    ]
    made += ["".join(p) for p in itertools.product(PIECES[:8], repeat=2)]
    made += ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6))) for _ in range(count)]
    return made


def test_the_name_helpers_say_what_their_regular_expressions_say() -> None:
    for text in texts(4000):
        assert targets._without_version(text) == re.sub(r"[\d.]+$", "", text), repr(text)
        assert targets._stem(text) == re.sub(r"\.\w+$", "", text), repr(text)
        assert targets._unversioned(text) == re.split(r"(?<=.)@|==|>=|<=|~=", text)[0], repr(text)
        assert targets._without_script_suffix(text) == re.sub(r"\.(m?[jt]s|c?js|py|rb|php|jar)$", "", text), repr(text)
        expected = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or targets.ADHOC_NAME
        assert targets.server_name(text) == expected, repr(text)


def test_an_era_cache_key_is_what_the_pattern_took() -> None:
    hexes = ["0" * 32, "abcdef0123456789" * 2, "A" * 32, "0" * 31, "0" * 33, "g" * 32, "0" * 31 + "\n"]
    keys = [f"{kind}:{rest}" for kind in ("stdio", "remote", "builtin", "http", "") for rest in [*hexes, "", "x", "a\nb", "ws"]]
    keys += ["builtin", "stdio", "builtin:\n", "builtin::", "stdio:" + "0" * 32 + ":", *texts(500)]
    for key in keys:
        assert is_key(key) == (re.fullmatch(r"(stdio|remote):[0-9a-f]{32}|builtin:.+", key) is not None), repr(key)


def test_a_stdio_command_s_name_compiles_no_pattern() -> None:
    """The names of `python -S server.py`, `npx -y pkg@1.2`, `mcp-server-everything` and the key
    check of servers.json: no regular expression compiled (re's cache stays as it was)."""
    re.purge()
    for argv in (["python3.11", "-S", "/srv/mcp/dist/index.py"], ["npx", "-y", "@scope/pkg@1.2"], ["/x/mcp-server-everything"]):
        targets.command_name(argv)
    is_key("stdio:" + "0" * 32)
    assert re._cache == {}  # type: ignore[attr-defined]


def test_a_stdio_command_splits_as_shlex_splits_it() -> None:
    """--stdio's command is split as shlex.split splits it, whether shlex is loaded (quotes,
    backslashes, tabs, newlines, other white space) or not (printable ASCII only), unbalanced
    quotes raising as shlex raises."""
    import shlex

    alphabet = [
        "a",
        "b",
        "-",
        "/",
        ".",
        "=",
        "#",
        "$",
        "@",
        " ",
        "  ",
        "'",
        '"',
        "\\",
        "\t",
        "\n",
        "\r",
        "\x0b",
        "\x0c",
        "\x1f",
        "\xa0",
        "\u2003",
        "é",
    ]
    rng = random.Random(34)
    texts = [
        "",
        " ",
        "npx -y @scope/pkg@1.2 /srv",
        "  python -m  srv  ",
        "a # b",
        "a 'b c'",
        'a "b c"',
        "a\\ b",
        "a\tb",
        "a\xa0b",
        "'open",
    ]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    for text in texts:
        try:
            expected: list[str] | str = shlex.split(text)
        except ValueError as exc:
            expected = str(exc)
        try:
            got: list[str] | str = targets.split_command(text)
        except ValueError as exc:
            got = str(exc)
        assert got == expected, repr(text)
