"""Many calls in one run (`call --batch`), through the pipeline's stages (services/pipeline.py):
every name routed and every call validated and decided first, the decisions on disk in one write
before any call runs; then each call executed, outcomes written in groups; results stream in
input order."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from llmc_cli import interrupts
from llmc_cli.errors import ExitCode, LlmcError, PolicyDenied, SkippedAfterFailure
from llmc_cli.model import JSON, JSONObject, Tool, ToolCall, ToolResult, collector_paused, expect_hashing
from llmc_cli.services.calls import unstarted_denial

if TYPE_CHECKING:
    from llmc_cli.services.calls import Authorization
    from llmc_cli.services.pipeline import Pipeline, ToolRequest


AUDIT_BYTES_PER_CALL = 800  # at least: a decision record and an outcome record, canonical JSON


class BatchItem:
    """One line of a batch: its id and request (None when the line could not be read), the call
    once its name is routed, or the error. (A class with slots, not a dataclass: a batch makes
    one a line, and reads its fields at every stage.)"""

    __slots__ = ("call", "duration_ms", "error", "gave_up", "id", "index", "request", "result")

    def __init__(
        self,
        index: int,
        id: JSON,
        request: ToolRequest | None = None,
        call: ToolCall | None = None,
        error: LlmcError | None = None,
        result: ToolResult | None = None,
        duration_ms: float | None = None,
        gave_up: str | None = None,
    ) -> None:
        self.index = index
        self.id = id  # the line's own "id", echoed in its result
        self.request = request
        self.call = call
        self.error = error
        self.result = result
        self.duration_ms = duration_ms
        self.gave_up = gave_up  # the outcome of a call that did not run to its end: skipped, internal_error

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
            out["server"], out["tool"] = self.call.server, self.call.tool  # (no keyword arguments to parse)
        if self.error is not None:
            out["error"] = self.error.to_json()
        elif self.result is not None:
            out.update(self.result.to_json())  # the fields of `llmc call`'s output, at the top
            if self.result.cached:
                out["cached"] = True
        out["durationMs"] = self.duration_ms
        return out


class Batch:
    """Run many calls over one connection per server: servers concurrently; within a server in
    input order, except that up to `parallel` consecutive read-only calls run at once. `on_done`
    gets the items in input order as soon as every earlier one is done, so results stream: it is
    called by the thread that finished the item (never two at once), not by a main thread woken
    for each call; `on_wait` after each run of items handed to on_done (a caller writing results
    buffered flushes them then: nothing done is held back while the batch waits). With
    `fail_fast`, calls not yet started after a failure are skipped (an error result saying so).
    With `validate`, each call's arguments are checked against its tool's inputSchema first (a
    line that does not fit gets its error, exit 2, and is not decided).

    Every call is decided first and all decision records go to disk in one write, before any
    call runs; outcome records are written in groups (audit.Deferred). A batch costs a few
    fsyncs, not two per call."""

    def __init__(
        self,
        pipeline: Pipeline,
        items: list[BatchItem],
        *,
        parallel: int = 1,
        fail_fast: bool = False,
        validate: bool = True,
        on_done: Callable[[BatchItem], None] | None = None,
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.items = items
        self.parallel = max(1, parallel)
        self.fail_fast = fail_fast
        self.validate = validate
        self.on_done = on_done
        self.on_wait = on_wait
        self.authorized: dict[int, Authorization] = {}
        self.stopped = False  # --fail-fast: a call failed, the rest are skipped (a flag: no Event.is_set call per call)
        # Which items are done: flags, not an Event each (a thousand Conditions made and set for
        # nothing: only the main thread waits, on _all_handed). A flag is set before _hand_on
        # takes the lock that reads it, and never cleared.
        self.done = [False] * len(items)
        self.tools: dict[int, Tool] = {}  # each validated call's tool, found once for its decision
        self.cleared: set[tuple[str, str]] = set()  # each (server, tool) no unstarted_denial refuses (run)
        self._handing = threading.Lock()  # one thread at a time hands items to on_done, in order
        self._handed = 0  # how many items on_done has had
        self._all_handed = threading.Event()
        self._hand_error: BaseException | None = None  # what on_done raised (a reader gone): raised by run()

    def run(self) -> None:

        with self.pipeline.grouped():
            with collector_paused():  # the decided calls live until the batch ends
                self._decide_all()
            workers = [
                threading.Thread(target=self._run_server, args=(queue,), daemon=True, name=f"llmc-batch-{server}")
                for server, queue in self._queues().items()
            ]
            for worker in workers:
                worker.start()
            self._hand_on()  # the items that were done before any call (lines that could not be read)
            interrupts.wait(self._all_handed.wait)
            if self._hand_error is not None:
                raise self._hand_error
            for worker in workers:
                interrupts.wait(functools.partial(_joined, worker))

    # -- before any call runs -------------------------------------------------------------------

    def _decide_all(self) -> None:
        """Every line routed, cleared, validated and decided; the decisions on disk."""
        self._route()
        # a server above the caller's clearance, or a call denied by name: denied when decided,
        # its server never started for it
        context = self.pipeline.context
        named = {(i.call.server, i.call.tool) for i in self.items if i.call is not None}  # each name judged once
        self.cleared = {key for key in named if unstarted_denial(context, *key) is None}
        self.pipeline.catalog.pool.warm_up(sorted({server for server, _ in self.cleared}))
        if self.validate:
            self._validate()
        self._authorize()

    def _route(self) -> None:
        """Each line's tool name to its server (the starting servers only those the batch names),
        each name routed once."""
        routes: dict[str, tuple[str, str]] = {}
        for item in self.items:
            if item.request is None or item.error is not None:
                continue
            try:
                route = routes.get(item.request.name)
                if route is None:
                    route = routes[item.request.name] = self.pipeline.route(item.request)
                server, name = route
            except LlmcError as exc:
                exc.message = f"line {item.index + 1}: {exc.message}"
                item.error = exc
                continue
            item.call = ToolCall(server, name, item.request.arguments or {})

    def _validate(self) -> None:
        """Each call's arguments against its tool's schema, in this process (one import of the
        validator for the whole batch). A tool that cannot be found is left to its call to report."""
        found: dict[tuple[str, str], Tool | None] = {}  # each tool looked up once per batch, as each name is routed
        names: dict[tuple[str, str], str] = {}  # each call.qualified_name, made once
        validate = self.pipeline.validate
        for item in self._runnable():
            assert item.call is not None
            key = (item.call.server, item.call.tool)
            if key in found:
                tool = found[key]
            elif key not in self.cleared:
                tool = found[key] = (
                    None  # above the caller's clearance or denied by name: denied when decided, never started to look
                )
            else:
                try:
                    tool = self.pipeline.catalog.find_tool(*key)
                except LlmcError:
                    tool = None  # a server that cannot list its tools: the call itself reports it
                found[key] = tool
            if tool is None:
                continue  # likewise "no tool named ..."
            self.tools[item.index] = tool
            name = names.get(key)
            if name is None:
                name = names[key] = item.call.qualified_name
            try:
                validate(item.call, tool, here=True, name=name)
            except LlmcError as exc:
                exc.message = f"line {item.index + 1}: {exc.message}"
                item.error = exc

    def _authorize(self) -> None:
        """Every call decided, the decisions on disk in one write."""
        runnable = self._runnable()
        # Each call's two audit records (~500 bytes each) are hashed into the chain: a batch
        # that will hash past lean's switch to OpenSSL makes it before its HMACs, not midway.
        expect_hashing(len(runnable) * AUDIT_BYTES_PER_CALL)
        cleared, tools, authorize = self.cleared, self.tools, self.pipeline.authorize
        found: dict[tuple[str, str], Tool | None] = {}  # unvalidated calls' tools, each looked up once
        for item in runnable:
            call = item.call
            assert call is not None
            key = (call.server, call.tool)
            tool = tools.get(item.index)
            if tool is None and key in cleared:
                tool = found[key] if key in found else found.setdefault(key, self._find(key))
            try:
                # a route run() cleared is not asked again: between there and here only servers
                # started and arguments were checked, neither of which an unstarted_denial reads
                self.authorized[item.index] = authorize(call, tool, key in cleared)
            except LlmcError as exc:
                item.error = exc
        self.pipeline.decide(list(self.authorized.values()))

    def _find(self, key: tuple[str, str]) -> Tool | None:
        """The tool of a cleared route (None: authorize looks it up and reports why it cannot)."""
        try:
            return self.pipeline.catalog.find_tool(*key)
        except LlmcError:
            return None

    def _finish(self, item: BatchItem) -> None:
        """The item is done: it, and every later one done before it, go to on_done now."""
        self.done[item.index] = True
        self._hand_on()

    def _hand_on(self) -> None:
        """Hand every item whose predecessors are all handed to on_done, in input order, then
        on_wait. Never raises: what on_done raises ends the handing and is raised by run()."""
        items, done, on_done = self.items, self.done, self.on_done  # (locals: read once an item, not per use)
        total = len(items)
        with self._handing:
            handed = n = self._handed  # (n: self._handed, kept in step with it)
            while n < total and done[n] and self._hand_error is None:
                if interrupts.received:  # (requested(), without its call): the main thread reports it; nothing more is shown
                    return
                self._handed = n = n + 1
                try:
                    if on_done is not None:
                        on_done(items[n - 1])
                except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                    self._hand_error = exc
            try:
                if n > handed and self.on_wait is not None and self._hand_error is None:
                    self.on_wait()
            except BaseException as exc:  # noqa: BLE001 - likewise
                self._hand_error = exc
            if n == total or self._hand_error is not None:
                self._all_handed.set()

    def _runnable(self) -> list[BatchItem]:
        return [item for item in self.items if item.call is not None and item.error is None]

    def _queues(self) -> dict[str, list[BatchItem]]:
        """The decided calls of each server, in input order; every other item is done now."""
        queues: dict[str, list[BatchItem]] = {}
        for item in self.items:
            if item.index in self.authorized:
                queues.setdefault(item.call.server, []).append(item)  # type: ignore[union-attr]
            else:
                self.done[item.index] = True
        return queues

    # -- the calls --------------------------------------------------------------------------------

    def _run_server(self, queue: list[BatchItem]) -> None:
        """One server's calls in input order, a group of read-only ones at once."""
        try:
            if self.parallel == 1:  # every group is one call: no pool (concurrent.futures imports logging)
                for item in queue:
                    self._run_one(item)
                return
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=self.parallel) as pool:
                for group in self._groups(queue):
                    if interrupts.requested():
                        # The main thread records the interruption and exits; once the interpreter
                        # finalizes, a pool takes no new work (RuntimeError, a traceback on
                        # stderr from this thread). The items left are abandoned below.
                        return
                    if len(group) == 1:
                        self._run_one(group[0])  # no hand-over to a pool thread for a sequential call
                    else:
                        try:
                            list(pool.map(self._run_one, group))
                        except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
                            if not interrupts.requested():
                                raise
                            return
        finally:  # whatever broke this thread, no item is left waiting
            for item in queue:
                if not self.done[item.index]:
                    self._abandon(item, "the call did not run: the batch worker of its server failed")
                    self._finish(item)

    def _groups(self, queue: list[BatchItem]) -> Iterator[list[BatchItem]]:
        """The queue in runs: up to `parallel` consecutive read-only calls, else one call."""
        i = 0
        while i < len(queue):
            group = [queue[i]]
            if self.parallel > 1 and self._read_only(queue[i]):
                while len(group) < self.parallel and i + len(group) < len(queue) and self._read_only(queue[i + len(group)]):
                    group.append(queue[i + len(group)])
            yield group
            i += len(group)

    def _read_only(self, item: BatchItem) -> bool:
        assert item.call is not None
        try:
            tool = self.pipeline.catalog.find_tool(item.call.server, item.call.tool)
        except LlmcError:
            return False
        return tool is not None and self.pipeline.read_only(tool)

    def _run_one(self, item: BatchItem) -> None:
        """One decided call. Never raises: every item gets a result and is marked done, or the
        batch would wait forever."""
        assert item.call is not None
        started = time.monotonic_ns()
        try:
            if self.stopped:
                self._give_up(item, SkippedAfterFailure(), "skipped")
                return
            try:
                item.result = self.pipeline.execute(self.authorized[item.index]).result  # a call's: never None
            except LlmcError as exc:
                item.error = exc
            # to 0.1 ms as pipeline.tenths_of_ms, without round(x, 1)'s decimal conversion
            item.duration_ms = (time.monotonic_ns() - started + 50_000) // 100_000 / 10
            if self.fail_fast and item.exit_code:
                self.stopped = True
        except BaseException as exc:  # noqa: BLE001 - an interruption or a bug: this item's result says so
            self._abandon(item, f"the call did not complete: {type(exc).__name__}: {exc}")
        finally:
            self.done[item.index] = True  # _finish's, a call less a call (the item handed on once)
            self._hand_on()

    def _give_up(self, item: BatchItem, error: LlmcError, outcome: str) -> None:
        """A call that will not run (or whose run broke): its error result and outcome record."""
        item.error = error
        item.gave_up = outcome
        self.pipeline.give_up(self.authorized[item.index], outcome, error.message)

    def _abandon(self, item: BatchItem, reason: str) -> None:
        """An internal_error outcome, whatever breaks on the way (e.g. the audit log is unwritable).
        The caller marks the item done (_run_one once, not also here)."""
        try:
            self._give_up(item, LlmcError(reason), "internal_error")
        except BaseException as error:  # noqa: BLE001 - the next items must still be marked done
            item.error = error if isinstance(error, LlmcError) else LlmcError(str(error))


def run_batch(
    pipeline: Pipeline,
    items: list[BatchItem],
    *,
    parallel: int = 1,
    fail_fast: bool = False,
    validate: bool = True,
    on_done: Callable[[BatchItem], None] | None = None,
    on_wait: Callable[[], None] | None = None,
) -> None:
    """A Batch of `items` through `pipeline`, run to its end."""
    Batch(pipeline, items, parallel=parallel, fail_fast=fail_fast, validate=validate, on_done=on_done, on_wait=on_wait).run()


def _joined(thread: threading.Thread, seconds: float) -> bool:
    thread.join(seconds)
    return not thread.is_alive()
