"""The line ending a batch that did not all go well (cli/batch.summary): counted from the items
that did not go well and how many finished, not from every finished item kept to the end."""

from __future__ import annotations

from llmc_cli.cli.batch import summary
from llmc_cli.errors import PolicyDenied, SkippedAfterFailure, UsageError
from llmc_cli.model import ToolResult
from llmc_cli.services.batch import BatchItem


def test_the_summary_counts_each_status_and_the_rest_as_ok() -> None:
    denied = BatchItem(1, 1, error=PolicyDenied("denied: no [rule]", rule="rule"))
    failed = BatchItem(2, 2, error=UsageError("line 3: a batch line must be a JSON object"))
    tool_error = BatchItem(3, 3, "srv.tool", {})
    tool_error.result = ToolResult([], is_error=True)
    skipped = BatchItem(4, 4, error=SkippedAfterFailure())
    skipped.gave_up = "skipped"
    not_ok = [denied, failed, tool_error, skipped]
    assert summary(not_ok, 9, 10) == "llmc: 10 calls: 5 ok, 1 denied, 2 failed, 1 skipped, 1 interrupted"
    assert summary([], 1, 1) == "llmc: 1 call: 1 ok"
    assert summary([], 0, 3) == "llmc: 3 calls: 0 ok, 3 interrupted"
