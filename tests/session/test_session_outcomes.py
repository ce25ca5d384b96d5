"""Services speak in outcomes, not CLI syntax (issue 34): a keeper's session asked to take an
ad-hoc server is refused with the session's name on the error; the CLI says which options to drop."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmc_cli import services
from llmc_cli.errors import ExitCode, SessionHoldsServers
from llmc_cli.model import ServerSpec
from tests.helpers import llmc


def test_services_refuse_an_adhoc_server_in_a_session_without_cli_syntax() -> None:
    adhoc = ServerSpec(name="adhoc", command="true", timeout=5)
    with pytest.raises(SessionHoldsServers) as caught:
        services.open_catalog(None, (), adhoc, None, None, None, "work")
    assert caught.value.session == "work"
    assert caught.value.exit_code == ExitCode.USAGE
    assert "--" not in caught.value.message  # no option names: that is the CLI's to say


def test_the_cli_names_the_options_to_drop(tmp_path: Path) -> None:
    result = llmc("tools", "list", "--session", "work", "--stdio", "true", cwd=tmp_path)
    assert result.returncode == ExitCode.USAGE
    assert "--session work uses the servers its keeper holds: drop --stdio/--url" in result.stderr
