"""`ask` on a terminal streams the model's text as it arrives, for every provider: the real SDKs
read each API's server-sent events from the wire-level fakes. The fake holds the rest of the reply
back until the test saw the first piece on the terminal, so this proves streaming without timing."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM, _pieces
from tests.fakes.scripts import APIS, turn
from tests.helpers import profile_file, sdk_server
from tests.terminal import Terminal

pytestmark = pytest.mark.e2e  # llmc on a real terminal (a pty)

KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "text": "OPENAI_API_KEY",
}
ANSWER = "The newest log says the disk on /var is full; nothing else went wrong."


def write_profile(root: Path, api: str, base_url: str) -> None:
    profile_file(
        root / "config",
        f"""
[servers.h]
command = "{sys.executable}"
args = ["{sdk_server("hostile_text.py")[1]}"]

[llm]
provider = "{api}"
model = "{"gemini-fake" if api == "gemini" else "model-fake"}"
base_url = "{base_url}"
""",
    )


@pytest.mark.parametrize("text_flag", [False, True], ids=["json (text on stderr)", "--text (text on stdout)"])
@pytest.mark.parametrize("api", APIS)
def test_the_answer_streams_to_a_terminal(isolated_dirs, api, text_flag):
    gate = threading.Event()
    answer = turn(api, text=ANSWER)
    answer.gate = gate
    script = [turn(api, calls=[("c1", "echo", {"message": "from a streamed call"})]), answer]
    with FakeLLM(api, script) as fake:
        write_profile(isolated_dirs, api, fake.base_url)
        argv = ["ask", "what happened?", *(["--text"] if text_flag else [])]
        with Terminal(*argv, env={KEY_ENV[api]: "k"}, stdout_on_terminal=text_flag) as term:
            try:
                term.expect(_pieces(ANSWER)[0])
                assert ANSWER not in term.screen  # the rest is still held back by the fake
            finally:
                gate.set()
            code = term.wait()
    assert code == 0, term.screen
    assert (
        all(r.body.get("stream") is True for r in fake.requests)
        if api != "gemini"
        else all(":streamGenerateContent" in r.path for r in fake.requests)
    )
    if text_flag:
        assert term.screen.count(ANSWER) == 1, term.screen  # streamed, not printed again at the end
    else:
        out = json.loads(term.stdout)
        assert out["answer"] == ANSWER and ANSWER in term.screen
        # the tool call was put together from the streamed pieces and ran
        assert [(s["tool"], s["arguments"], s["outcome"]) for s in out["steps"]] == [
            ("h.echo", {"message": "from a streamed call"}, "ok")
        ]
        assert out["usageTotal"]["outputTokens"] > 0


@pytest.mark.parametrize("api", APIS)
def test_a_server_that_ignores_stream_true_still_gives_its_answer(isolated_dirs, api):
    """Some OpenAI-compatible proxies and local servers answer `stream: true` with one JSON
    document: the answer (and a tool call before it) is read from that, shown and printed."""
    import dataclasses

    script = [
        dataclasses.replace(turn(api, calls=[("c1", "echo", {"message": "unstreamed call"})]), unstreamed=True),
        dataclasses.replace(turn(api, text=ANSWER), unstreamed=True),
    ]
    with FakeLLM(api, script) as fake:
        write_profile(isolated_dirs, api, fake.base_url)
        with Terminal("ask", "what happened?", env={KEY_ENV[api]: "k"}) as term:
            code = term.wait()
    assert code == 0, term.screen
    out = json.loads(term.stdout)
    assert out["answer"] == ANSWER and ANSWER in term.screen
    assert [(s["tool"], s["outcome"]) for s in out["steps"]] == [("h.echo", "ok")]


@pytest.mark.parametrize("api", APIS)
def test_an_empty_stream_is_a_provider_error_not_an_empty_answer(isolated_dirs, api):
    from tests.fakes.llm import Reply

    with FakeLLM(api, [Reply(200, None)]) as fake:
        write_profile(isolated_dirs, api, fake.base_url)
        with Terminal("ask", "what happened?", env={KEY_ENV[api]: "k"}) as term:
            code = term.wait()
    assert code == 8, term.screen
    assert "no answer" in term.screen or "without a response" in term.screen, term.screen
