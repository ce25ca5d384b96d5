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

KEY_ENV = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
           "gemini": "GEMINI_API_KEY", "text": "OPENAI_API_KEY"}
ANSWER = "The newest log says the disk on /var is full; nothing else went wrong."


def write_profile(root: Path, api: str, base_url: str) -> None:
    profile_file(root / "config", f"""
[servers.h]
command = "{sys.executable}"
args = ["{sdk_server('hostile_text.py')[1]}"]

[llm]
provider = "{api}"
model = "{'gemini-fake' if api == 'gemini' else 'model-fake'}"
base_url = "{base_url}"
""")


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
    assert all(r.body.get("stream") is True for r in fake.requests) if api != "gemini" else \
        all(":streamGenerateContent" in r.path for r in fake.requests)
    if text_flag:
        assert term.screen.count(ANSWER) == 1, term.screen  # streamed, not printed again at the end
    else:
        out = json.loads(term.stdout)
        assert out["answer"] == ANSWER and ANSWER in term.screen
        # the tool call was put together from the streamed pieces and ran
        assert [(s["tool"], s["arguments"], s["outcome"]) for s in out["steps"]] == \
            [("h.echo", {"message": "from a streamed call"}, "ok")]
        assert out["usageTotal"]["outputTokens"] > 0
