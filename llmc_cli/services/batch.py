"""Many calls in one run: every decision on disk in one write before any call runs, then each call
through call_tool, outcomes written in groups; results stream in input order."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from llmc_cli.catalog import Catalog
from llmc_cli.errors import ExitCode, LlmcError, PolicyDenied
from llmc_cli.model import JSON, JSONObject, ToolCall, ToolResult
from llmc_cli.services.calls import OPEN_CALLS, Authorization, Invocation, authorize, call_tool, record_decisions, write_record

if TYPE_CHECKING:
    import threading

    from llmc_cli.store.chain import AuditSink


@dataclass
class BatchItem:
    """One line of a batch: its id, the call (None when the line could not be read) or the error."""

    index: int
    id: JSON  # the line's own "id", echoed in its result
    call: ToolCall | None = None
    error: LlmcError | None = None
    result: ToolResult | None = None
    duration_ms: float | None = None
    gave_up: str | None = None  # the outcome of a call that did not run to its end: skipped, internal_error

    @property
    def status(self) -> str:
        """What a batch's summary counts it as: ok, denied, skipped or failed."""
        if self.gave_up == "skipped":
            return "skipped"
        if isinstance(self.error, PolicyDenied):
            return "denied"
        return "ok" if self.exit_code == ExitCode.OK else "failed"

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return self.error.exit_code
        return ExitCode.TOOL_ERROR if self.result is not None and self.result.is_error else ExitCode.OK

    def to_json(self) -> JSONObject:
        out: dict[str, Any] = {"id": self.id}
        if self.call is not None:
            out.update(server=self.call.server, tool=self.call.tool)
        if self.error is not None:
            out["error"] = self.error.to_json()
        elif self.result is not None:
            out.update(self.result.to_json())  # the fields of `llmc call`'s output, at the top
            if self.result.cached:
                out["cached"] = True
        out["durationMs"] = self.duration_ms
        return out


def run_batch(
    catalog: Catalog,
    invocation: Invocation,
    items: list[BatchItem],
    *,
    parallel: int = 1,
    fail_fast: bool = False,
    on_done: Callable[[BatchItem], None] | None = None,
) -> None:
    """Run many calls over one connection per server: servers concurrently; within a server in
    input order, except that up to `parallel` consecutive read-only calls run at once. `on_done`
    gets the items in input order as soon as every earlier one is done, so results stream. With
    `fail_fast`, calls not yet started after a failure are skipped (an error result saying so).

    Every call is decided first and all decision records go to disk in one write, before any
    call runs; then each runs through call_tool, whose outcome records are written in groups
    (audit.Deferred). A batch costs a few fsyncs, not two per call."""
    from llmc_cli import audit
    from llmc_cli.services.state import audit_log

    with audit.Deferred(audit_log(invocation.state)) as trail:
        _run_batch(catalog, replace(invocation, audit=trail), trail, items, parallel, fail_fast, on_done)


def _run_batch(
    catalog: Catalog,
    invocation: Invocation,
    trail: AuditSink,
    items: list[BatchItem],
    parallel: int,
    fail_fast: bool,
    on_done: Callable[[BatchItem], None] | None,
) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from llmc_cli import interrupts, policy

    authorized: dict[int, Authorization] = {}
    for item in items:
        if item.call is not None and item.error is None:  # an error already: refused before any decision
            try:
                authorized[item.index] = authorize(catalog, invocation, item.call)
            except LlmcError as exc:
                item.error = exc
    record_decisions(trail, invocation, list(authorized.values()))
    stop = threading.Event()
    done = [threading.Event() for _ in items]
    by_server: dict[str, list[BatchItem]] = {}
    for item in items:
        if item.index not in authorized:
            done[item.index].set()
        else:
            by_server.setdefault(item.call.server, []).append(item)  # type: ignore[union-attr]

    def give_up(item: BatchItem, error: LlmcError, outcome: str) -> None:
        """A call that will not run (or whose run broke): its error result and outcome record."""
        item.error = error
        item.gave_up = outcome
        if OPEN_CALLS.close(authorized[item.index].opened):
            write_record(
                trail,
                {**authorized[item.index].base, "event": "outcome", "outcome": outcome, "reason": error.message},
                authorized[item.index].masker,
                before_action=False,
            )

    def run_one(item: BatchItem) -> None:
        # Never raises: every item gets a result and is marked done, or the batch would wait forever.
        assert item.call is not None
        started = time.monotonic()
        try:
            if stop.is_set():
                give_up(item, LlmcError("skipped: an earlier call failed (--fail-fast)"), "skipped")
            else:
                try:
                    item.result = call_tool(catalog, invocation, item.call, authorized=authorized[item.index])
                except LlmcError as exc:
                    item.error = exc
                item.duration_ms = round((time.monotonic() - started) * 1000, 1)
                if fail_fast and item.exit_code:
                    stop.set()
        except BaseException as exc:  # noqa: BLE001 - an interruption or a bug: this item's result says so
            try:
                give_up(item, LlmcError(f"the call did not complete: {type(exc).__name__}: {exc}"), "internal_error")
            except BaseException as error:  # noqa: BLE001 - e.g. the audit log is unwritable
                item.error = error if isinstance(error, LlmcError) else LlmcError(str(error))
        finally:
            done[item.index].set()

    def read_only(item: BatchItem) -> bool:
        assert item.call is not None
        try:
            tool = catalog.find_tool(item.call.server, item.call.tool)
        except LlmcError:
            return False
        return tool is not None and policy.is_read_only(tool, item.call.qualified_name, invocation.profile.profile.policy)

    def run_server(queue: list[BatchItem]) -> None:
        try:
            with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
                i = 0
                while i < len(queue):
                    group = [queue[i]]
                    if parallel > 1 and read_only(queue[i]):
                        while len(group) < parallel and i + len(group) < len(queue) and read_only(queue[i + len(group)]):
                            group.append(queue[i + len(group)])
                    if len(group) == 1:
                        run_one(group[0])  # no hand-over to a pool thread for a sequential call
                    else:
                        list(pool.map(run_one, group))
                    i += len(group)
        finally:  # whatever broke this thread, no item is left waiting
            for item in queue:
                if not done[item.index].is_set():
                    run_one_failed(item)

    def run_one_failed(item: BatchItem) -> None:
        try:
            give_up(item, LlmcError("the call did not run: the batch worker of its server failed"), "internal_error")
        except BaseException as error:  # noqa: BLE001 - the next items must still be marked done
            item.error = error if isinstance(error, LlmcError) else LlmcError(str(error))
        finally:
            done[item.index].set()

    workers = [
        threading.Thread(target=run_server, args=(queue,), daemon=True, name=f"llmc-batch-{server}")
        for server, queue in by_server.items()
    ]
    for worker in workers:
        worker.start()
    for item in items:  # in input order, each as soon as it and every earlier one are done
        interrupts.wait(done[item.index].wait)
        if on_done:
            on_done(item)
    for worker in workers:
        interrupts.wait(functools.partial(_joined, worker))


def _joined(thread: threading.Thread, seconds: float) -> bool:
    thread.join(seconds)
    return not thread.is_alive()
