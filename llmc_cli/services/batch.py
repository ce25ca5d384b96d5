"""Many calls in one run (`call --batch`), through the pipeline's stages (services/pipeline.py):
every name routed and every call validated and decided first, the decisions on disk in one write
before any call runs; then each call executed, outcomes written in groups; results stream in
input order."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from llmc_cli import interrupts
from llmc_cli.errors import ExitCode, LlmcError, PolicyDenied, SkippedAfterFailure
from llmc_cli.model import JSON, JSONObject, Tool, ToolCall, ToolResult, collector_paused, expect_hashing
from llmc_cli.services.calls import unstarted_denial
from llmc_cli.services.request import ToolRequest

if TYPE_CHECKING:
    from llmc_cli.mcp.validation import QuickCheck
    from llmc_cli.services.calls import Authorization
    from llmc_cli.services.pipeline import Pipeline
    from llmc_cli.services.routes import Route


AUDIT_BYTES_PER_CALL = 800  # at least: a decision record and an outcome record, canonical JSON
_new = object.__new__


class BatchItem:
    """One line of a batch: its id, the tool it names and its arguments (None when the line could
    not be read), the call once its name is routed, or the error. (A class with slots, not a
    dataclass: a batch makes one a line, and reads its fields at every stage; no ToolRequest a
    line: a name is routed once, ~3,000 instructions a line.)"""

    __slots__ = ("arguments", "call", "duration_ms", "error", "gave_up", "id", "index", "name", "result")

    def __init__(
        self,
        index: int,
        id: JSON,
        name: str | None = None,
        arguments: JSONObject | None = None,
        call: ToolCall | None = None,
        error: LlmcError | None = None,
    ) -> None:
        self.index = index
        self.id = id  # the line's own "id", echoed in its result
        self.name = name  # SERVER.TOOL or a bare tool name, as the line gives it
        self.arguments = arguments
        self.call = call
        self.error = error
        self.result: ToolResult | None = None
        self.duration_ms: float | None = None
        self.gave_up: str | None = None  # the outcome of a call that did not run to its end: skipped, internal_error

    @classmethod
    def many(cls, lines: Iterable[tuple[int, JSON, str, JSONObject | None, LlmcError | None]]) -> list[BatchItem]:
        """An item of each (index, id, name, arguments, error), as BatchItem(index, id, name or
        None, arguments, error=error) makes it: its fields set here, without __init__'s call
        through type.__call__ (~1,500 instructions a line)."""
        items: list[BatchItem] = []
        for index, ident, name, arguments, error in lines:
            item = _new(cls)
            item.index, item.id, item.name, item.arguments = index, ident, name or None, arguments
            item.call = item.result = item.duration_ms = item.gave_up = None
            item.error = error
            items.append(item)
        return items

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
        """The item's result line: {id, server, tool}, then the error, or the result's fields as
        ToolResult.to_json gives them (`llmc call`'s output, at the top), then durationMs."""
        call, result = self.call, self.result
        if call is not None and self.error is None and result is not None:
            # (a call's result, most lines) one dict in its keys' order, ToolResult.to_json's
            # fields set here: no second dict, its content list not copied (encoded, not kept)
            out: dict[str, Any] = {
                "id": self.id,
                "server": call.server,
                "tool": call.tool,
                "content": result.content,
                "isError": result.is_error,
            }
            if result.structured_content is not None:
                out["structuredContent"] = result.structured_content
            if result.meta:
                out["_meta"] = result.meta
            if result.cached:
                out["cached"] = True
            out["durationMs"] = self.duration_ms
            return out
        out = {"id": self.id}
        if call is not None:
            out["server"], out["tool"] = call.server, call.tool  # (no keyword arguments to parse)
        if self.error is not None:
            out["error"] = self.error.to_json()
        elif result is not None:
            out.update(result.to_json())  # the fields of `llmc call`'s output, at the top
            if result.cached:
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
        routed, lanes = self._route()
        # a server above the caller's clearance, or a call denied by name: denied when decided,
        # its server never started for it (each route judged once)
        context = self.pipeline.context
        self.cleared = {key for key in lanes if unstarted_denial(context, *key) is None}
        self.pipeline.catalog.pool.warm_up(sorted({server for server, _ in self.cleared}))
        for lane in lanes.values():
            self._prepare(lane)
        self._decide(routed)

    def _route(self) -> tuple[list[tuple[BatchItem, _Lane]], dict[tuple[str, str], _Lane]]:
        """Each line's tool name to its server (the starting servers only those the batch names),
        each name routed once: the routed items with their route's lane, and the lanes."""
        names: dict[str, _Lane] = {}
        lanes: dict[tuple[str, str], _Lane] = {}  # two names of one tool (bare, qualified) share its lane
        routed: list[tuple[BatchItem, _Lane]] = []
        route_of = self.pipeline.route
        for item in self.items:
            name = item.name
            if name is None or item.error is not None:
                if item.call is not None and item.error is None:  # an item its maker routed (the call given)
                    key = (item.call.server, item.call.tool)
                    routed.append((item, lanes[key] if key in lanes else lanes.setdefault(key, _Lane(key))))
                continue
            lane = names.get(name)
            if lane is None:
                try:
                    key = route_of(ToolRequest(name))
                except LlmcError as exc:
                    exc.message = f"line {item.index + 1}: {exc.message}"
                    item.error = exc
                    continue
                lane = names[name] = lanes[key] if key in lanes else lanes.setdefault(key, _Lane(key))
            # ToolCall(lane.server, lane.tool_name, arguments)'s fields, set here: a dataclass's
            # __init__ is called through type.__call__ (~2,000 instructions a line)
            item.call = call = _new(ToolCall)
            call.server, call.tool, call.arguments, call.call_id = lane.server, lane.tool_name, item.arguments or {}, None
            routed.append((item, lane))
        return routed, lanes

    def _prepare(self, lane: _Lane) -> None:
        """A route's tool (None: above the caller's clearance or denied by name, denied when
        decided and never started to look; or a server that cannot list its tools, which the
        call itself reports), its calls' qualified name and its schema's quick check."""
        lane.cleared = lane.key in self.cleared
        if not lane.cleared:
            return
        try:
            lane.tool = self.pipeline.catalog.find_tool(*lane.key)
        except LlmcError:
            return
        if lane.tool is not None and self.validate:
            lane.check = self.pipeline.quick_check(lane.tool, lane.name)

    def _decide(self, routed: list[tuple[BatchItem, _Lane]]) -> None:
        """Each routed call validated (its arguments against its tool's schema, in this process:
        one import of the validator for the whole batch; a tool that cannot be found is left to
        its call to report) and decided, in input order; the decisions on disk in one write."""
        # Each call's two audit records (~500 bytes each) are hashed into the chain: a batch
        # that will hash past lean's switch to OpenSSL makes it before its HMACs, not midway.
        expect_hashing(len(routed) * AUDIT_BYTES_PER_CALL)
        validate, authorize, authorized = self.pipeline.validate, self.pipeline.authorize, self.authorized
        for item, lane in routed:
            call = item.call
            assert call is not None
            check = lane.check
            if check is not None:
                try:
                    if not check(call.arguments, lane.name):
                        validate(call, lane.tool, here=True, name=lane.name)  # type: ignore[arg-type]  # (checked: a tool's)
                except LlmcError as exc:
                    exc.message = f"line {item.index + 1}: {exc.message}"
                    item.error = exc
                    continue
            # authorize's own Route (what it takes for the call), asked straight: the tool and
            # the policy it holds for do not change between calls of one batch
            route = lane.route
            if route is not None and (decided := route.authorize(call)) is not None:
                authorized[item.index] = decided
                continue
            try:
                # a route _decide_all cleared is not asked again: between there and here only
                # servers started and arguments were checked, neither of which an unstarted_denial reads
                authorized[item.index] = authorize(call, lane.tool, lane.cleared)
            except LlmcError as exc:
                item.error = exc
                continue
            if route is None and lane.cleared:
                lane.route = self.pipeline.settled_route(lane.key, lane.tool)
        self.pipeline.decide(list(authorized.values()))

    def _finish(self, item: BatchItem) -> None:
        """The item is done: it, and every later one done before it, go to on_done now."""
        self.done[item.index] = True
        self._hand_on()

    def _hand_on(self) -> None:
        """Hand every item whose predecessors are all handed to on_done, in input order, then
        on_wait. Never raises: what on_done raises ends the handing and is raised by run()."""
        items, done, on_done = self.items, self.done, self.on_done  # (locals: read once an item, not per use)
        total = len(items)
        # (acquire and release, not `with`: it looks up and binds __enter__ and __exit__, ~1,000
        # instructions; every call's thread hands on)
        handing = self._handing
        handing.acquire()
        try:
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
        finally:
            handing.release()

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


class _Lane:
    """One route of a batch, (server, tool): what its calls share from routing to their decisions.
    `route`: authorize's Route once it stands for every later call (Pipeline.settled_route)."""

    __slots__ = ("check", "cleared", "key", "name", "route", "server", "tool", "tool_name")

    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key
        self.server, self.tool_name = key
        self.name = f"{key[0]}.{key[1]}"  # its calls' qualified_name
        self.cleared = False
        self.tool: Tool | None = None
        self.check: QuickCheck | None = None  # its schema's (validating calls of a tool found)
        self.route: Route | None = None


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
