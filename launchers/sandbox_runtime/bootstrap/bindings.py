# Bindings: the program's calls of the agent's tools (docs/bindings.md). ToolError, ToolCall,
# call_tool, the built-in tools and one alias per tool name, put in the program's globals before
# it runs. A call travels on the channel between `run` and `done`; under asyncio calls gathered
# together are in flight together.

CHANNEL = None  # the channel, once main() opened it: calls travel on it between run and done
OFFERED = ()  # the offered tools' names, for a NameError's hint (done.py): TOOLS is the program's to rebind


class ToolError(Exception):
    """A call of a tool that produced no result. Branch on .kind (a closed set: unknown_tool,
    excluded_builtin, denied, budget_exhausted, tool_failed, ...: the host's tool_error_kind,
    listed in docs/kinds.md), never on the message. .tool is the name that was called."""

    def __init__(self, kind, tool, message=""):
        super().__init__(message)
        self.kind, self.tool = kind, tool

    def __str__(self):
        return f"{self.kind}: {self.tool}: {self.args[0] if self.args else ''}"


class ToolResultHandle:
    """A result too large to hand over whole, preserved on the host. Read it in windows of its
    text (the result pretty-printed): `await handle.read(offset=0, limit=100)` for lines, or
    `pattern="regex"` to search. A window wider than the per-call ceiling is refused with
    binding_result_too_large: ask for fewer lines."""

    __slots__ = ("handle", "size", "lines", "tool", "_call_tool")

    def __init__(self, tool, info, call_tool):
        self.tool, self._call_tool = tool, call_tool
        self.handle, self.size, self.lines = info.get("handle"), info.get("size_bytes"), info.get("lines")

    def read(self, offset=0, limit=100, pattern=None):
        arguments = {"handle": self.handle, "offset": offset, "limit": limit}
        if pattern is not None:
            arguments["pattern"] = pattern
        return ToolCall("handle.read", self._call_tool, ("read_tool_output", arguments), sys._getframe(1))

    def __repr__(self):
        return f"<ToolResultHandle of {self.tool}: {self.size} bytes, {self.lines} lines>"


def tool_error_of(reply, name):
    error = reply.get("error") if type(reply.get("error")) is dict else {}
    return ToolError(error.get("kind", "tool_failed"), error.get("tool", name), error.get("message", ""))


class Calls:
    """The program's calls on the channel. Without a running event loop each call is one blocking
    round trip (no asyncio import, and no concurrency needed: nothing can gather). Under asyncio a
    call is a future of the running loop: the channel is watched with add_reader and each result
    resolves its future by id, so calls gathered together are in flight together, and a call the
    program gives up on is cancelled on the host. On Windows only a SelectorEventLoop can watch the
    channel: under a ProactorEventLoop (asyncio's default there, made by the program's own
    asyncio.run) each call is a blocking round trip."""

    def __init__(self):
        self.call_tool = None  # for the handles results may come as
        self.next_id = 0
        self.waiting = {}      # id -> (future, name), under asyncio
        self.abandoned = set()  # ids whose result nobody waits for any more
        self.watched = None    # the loop whose reader is on the channel

    def start(self, name, arguments):
        self.next_id += 1
        try:  # by hand around the arguments: a call's frame is the per-call cost a loop pays
            encoded = encode_json(arguments) if arguments else "{}"
        except (TypeError, ValueError, RecursionError) as error:
            raise ToolError("malformed_call", name, f"arguments cannot travel as JSON: {error}") from None
        CHANNEL.send(f'{{"type":"call","id":{self.next_id},"tool":{ENCODE_STRING(name)},"arguments":{encoded}}}\n'
                     .encode("utf-8", "replace"))
        return self.next_id

    def round_trip(self, name, arguments):
        call_id = self.start(name, arguments)
        while True:
            reply = CHANNEL.receive()
            if reply.get("type") != "result":
                raise ProtocolError(f"expected the result of call {call_id}, got {reply.get('type')!r}")
            if reply.get("id") == call_id:
                return self.settle(reply, name)
            if reply.get("id") not in self.abandoned:
                raise ProtocolError(f"expected the result of call {call_id}, got one for {reply.get('id')!r}")
            self.abandoned.discard(reply.get("id"))

    def settle(self, reply, name):
        if reply.get("ok") is True:
            if type(reply.get("handle")) is dict:
                return ToolResultHandle(name, reply["handle"], self.call_tool)
            return reply.get("value")
        raise tool_error_of(reply, name)

    def in_loop(self, loop, name, arguments):
        call_id = self.start(name, arguments)
        future = loop.create_future()
        self.waiting[call_id] = (future, name)
        future.add_done_callback(lambda done: self.given_up(call_id, done))
        if self.watched is not loop:  # watched for the loop's life: two epoll_ctl per call cost more than a call
            if self.watched is not None:
                observe(lambda: self.watched.remove_reader(CHANNEL.fd), None)
            loop.add_reader(CHANNEL.fd, self.readable)
            self.watched = loop
        return future

    def given_up(self, call_id, future):
        if future.cancelled() and self.waiting.pop(call_id, None) is not None:
            self.abandoned.add(call_id)
            observe(lambda: CHANNEL.send(frame_bytes({"type": "cancel_call", "id": call_id})), None)

    def readable(self):
        try:
            replies = CHANNEL.receive_ready()
        except (ProtocolError, OSError) as error:
            for future, _ in self.waiting.values():
                future.set_exception(ProtocolError(str(error)))
            self.waiting.clear()
            observe(lambda: self.watched.remove_reader(CHANNEL.fd), None)  # a closed channel stays readable
            self.watched = None
            return
        for reply in replies:
            entry = self.waiting.pop(reply.get("id"), None) if reply.get("type") == "result" else None
            if entry is None:
                self.abandoned.discard(reply.get("id"))
                continue
            future, name = entry
            if not future.done():
                try:
                    future.set_result(self.settle(reply, name))
                except ToolError as error:
                    future.set_exception(error)


REPORTED_LINES = set()  # (file, line) of the calls already reported as not awaited: one report per line


class ToolCall:
    """What calling a tool returns: the call itself, made when it is awaited, alone
    (`await lookup(sku="A")`) or among others (`await asyncio.gather(...)`, a task). It is a
    coroutine as asyncio sees one. Using it as if it were the result (subscripting it, reading an
    attribute, iterating, printing, testing it) raises an error that says what to write, at the
    program's line; one dropped without being awaited is reported in stderr at the line that made
    it, instead of Python's "coroutine ... was never awaited" from inside the bootstrap."""

    __slots__ = ("_label", "_perform", "_arguments", "_coroutine", "_file", "_line", "_reported")

    def __init__(self, label, perform, arguments, caller):
        self._label, self._perform, self._arguments = label, perform, arguments
        self._coroutine, self._reported = None, False
        self._file, self._line = caller.f_code.co_filename, caller.f_lineno

    def _begin(self):
        if self._coroutine is None:
            self._coroutine = self._perform(*self._arguments)
        return self._coroutine

    def __await__(self):
        return self._begin().__await__()

    def send(self, value):
        return self._begin().send(value)

    def throw(self, *exception):
        return self._begin().throw(*exception)

    def close(self):
        if self._coroutine is None:
            self._reported = True  # given up before it started (a task cancelled early): nothing to say
        else:
            self._coroutine.close()

    def _complaint(self):
        self._reported = True
        REPORTED_LINES.add((self._file, self._line))
        call = f"{self._label}(...)"
        if self._coroutine is None:
            return f"{call} must be awaited: write `await {call}`; without await the tool is not called"
        return f"{call} is the call, not its result: write `result = await {call}` and use `result`"

    def _refuse(self, *_):
        raise TypeError(self._complaint()) from None

    def __getattr__(self, name):
        if name.startswith("__") or name in ToolCall.__slots__:  # introspection (hasattr), or mid-__init__
            raise AttributeError(name)
        raise AttributeError(self._complaint()) from None

    def __repr__(self):
        state = "not awaited" if self._coroutine is None else "awaited"
        return f"<ToolCall {self._label}(...), {state}: its result is `await {self._label}(...)`>"

    __hash__ = object.__hash__

    def __del__(self):
        try:
            if self._coroutine is None and not self._reported and (self._file, self._line) not in REPORTED_LINES:
                warn_unawaited(self._complaint().replace(" must be awaited:", " was never awaited:", 1),
                               self._file, self._line)
        except BaseException:  # at interpreter shutdown our globals may be gone: nobody reads stderr then
            pass


# Every use of a value a result would have. Not __next__: asyncio would take a ToolCall with one
# for an iterator and step it with next() instead of send().
for _name in ("getitem", "setitem", "delitem", "iter", "aiter", "len", "contains", "bool", "str", "format", "bytes",
              "int", "float", "complex", "index", "call", "enter", "exit", "aenter", "aexit", "eq", "ne", "lt", "le",
              "gt", "ge", "neg", "pos", "abs", "invert", "round",
              *(prefix + operator for prefix in ("", "r", "i") for operator in (
                  "add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift",
                  "and", "or", "xor"))):
    setattr(ToolCall, f"__{_name}__", ToolCall._refuse)
del _name


def warn_unawaited(message, filename, line):
    """A RuntimeWarning at the program's line, through the program's warning filters; written
    plainly if those filters make it an error (a warning from a finalizer cannot raise)."""
    try:
        import _warnings
        _warnings.warn_explicit(message, RuntimeWarning, filename, line)
    except BaseException:
        observe(lambda: sys.stderr.write(f"{filename}:{line}: RuntimeWarning: {message}\n"), None)


def coroutine_never_started(obj):
    """True for a native coroutine that was made and never awaited (cr_suspended where the
    interpreter has it; before that, a frame that never ran had f_lasti -1)."""
    if type(obj) is not COROUTINE_TYPE or (frame := obj.cr_frame) is None or obj.cr_running:
        return False
    suspended = getattr(obj, "cr_suspended", None)
    return not suspended if suspended is not None else frame.f_lasti == -1


async def never_run():
    pass


COROUTINE_TYPE = type(_coroutine := never_run())
_coroutine.close()
del _coroutine


def report_unawaited(namespace):
    """Reports the calls and coroutines the program left in its globals without awaiting them,
    while the program's line can still be named: dropped later by the bootstrap, Python would name
    a line of the bootstrap instead."""
    for value in list(namespace.values()):
        if type(value) is ToolCall:
            value.__del__()
        elif coroutine_never_started(value):
            code = value.cr_code
            REPORTED_LINES.add((code.co_filename, code.co_firstlineno))
            warn_unawaited(f"coroutine '{value.__qualname__}' was never awaited: write `await "
                           f"{value.__name__}(...)`", code.co_filename, code.co_firstlineno)
            value.close()  # closed before it ran: Python has nothing more to say about it


def make_call_tool(excluded):
    """call_tool, and the coroutine function every binding's call runs when it is awaited."""
    calls, modules = Calls(), sys.modules

    async def perform(name, arguments=None, keywords=None):
        if type(name) is not str:
            raise ToolError("malformed_call", repr(name), "a tool's name is a string")
        if keywords:
            arguments = {**(arguments or {}), **keywords}
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolError("malformed_call", name, positional_complaint(name, arguments, keywords is None))
        if name in excluded:
            raise ToolError("excluded_builtin", name, excluded[name])
        asyncio = modules.get("asyncio")  # per call, not per program: a loop may start at any time
        if asyncio is not None and (loop := asyncio._get_running_loop()) is not None:
            if not (WINDOWS and isinstance(loop, asyncio.ProactorEventLoop)):  # it has no add_reader
                return await calls.in_loop(loop, name, arguments)
        return calls.round_trip(name, arguments)

    def call_tool(name, arguments=None):
        """await call_tool(name, {...}): calls the tool of that model-facing name, whatever
        characters it has, with a dict of arguments; returns its JSON value or raises ToolError."""
        return ToolCall("call_tool", perform, (name, arguments), sys._getframe(1))

    calls.call_tool = perform
    return call_tool, perform


def positional_complaint(name, arguments, through_call_tool):
    """What to write instead of a positional argument: a tool's arguments are named."""
    given = f"got a positional {type(arguments).__name__}"
    if through_call_tool:
        return f"call_tool's arguments are one dict of named values: `await call_tool({name!r}, {{'key': value}})`; {given}"
    return f"pass the arguments by name (keyword arguments): `await {name}(key=value, ...)`; {given}"


def make_builtins(perform):
    def list_tools(offset=0, limit=100):
        """await list_tools(): the offered tools, sorted by name, a window at a time: {"tools":
        [{name, description, deferred}], "total": N, "next_offset": N or None}. Read-only, bounded."""
        return ToolCall("list_tools", perform, ("list_tools", {"offset": offset, "limit": limit}), sys._getframe(1))

    def get_tool_info(name):
        """await get_tool_info(name): one offered tool's name, description and argument schema
        ("input_schema"): the way to a deferred tool's arguments."""
        return ToolCall("get_tool_info", perform, ("get_tool_info", {"name": name}), sys._getframe(1))

    def read_tool_output(handle, offset=0, limit=100, pattern=None):
        """await read_tool_output(handle, ...): a window of a result this program's own call
        received as a ToolResultHandle: lines from `offset`, at most `limit`, or only those
        matching `pattern`."""
        arguments = {"handle": handle.handle if isinstance(handle, ToolResultHandle) else handle,
                     "offset": offset, "limit": limit}
        if pattern is not None:
            arguments["pattern"] = pattern
        return ToolCall("read_tool_output", perform, ("read_tool_output", arguments), sys._getframe(1))

    return {"list_tools": list_tools, "get_tool_info": get_tool_info, "read_tool_output": read_tool_output}


def make_alias(perform, name):
    def alias(arguments=None, /, **keywords):
        return ToolCall(name, perform, (name, arguments, keywords), sys._getframe(1))
    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"await {name}(key=value, ...): call_tool({name!r}, {{...}})"
    return alias


def bind_tools(namespace, bindings, excluded):
    """TOOLS, call_tool, ToolError, and one alias per name that is a usable identifier and not a
    keyword: never a mangled one, so `list-repos` gets none and `list_repos` is the real one."""
    global OFFERED
    names = sorted({b["name"] for b in bindings if type(b) is dict and type(b.get("name")) is str})
    OFFERED = tuple(names)
    excluded = {e["name"]: e.get("reason", "") for e in excluded if type(e) is dict and type(e.get("name")) is str}
    call_tool, perform = make_call_tool(excluded)
    namespace.update(TOOLS=tuple(names), call_tool=call_tool, ToolError=ToolError, ToolResultHandle=ToolResultHandle,
                     **make_builtins(perform))
    if names:
        import keyword
        for name in names:
            if name.isidentifier() and not keyword.iskeyword(name):
                namespace[name] = make_alias(perform, name)
