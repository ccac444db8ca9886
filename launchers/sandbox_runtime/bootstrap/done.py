# done: the value, or the failure as data. The program's value, checked for what JSON cannot carry
# and encoded; or its exception or syntax error, described with the program's own lines and none of
# the bootstrap's frames, and the limit it most likely hit.

MAX_FRAME_BYTES = 16 << 20  # the host's default bound on one channel frame
MAX_VALUE_DEPTH = 63  # the host allows 64 levels in a frame; the done object is one of them
MAX_ERROR_TEXT = 256 << 10  # per message/traceback, so a giant one cannot overflow the frame


def qualified_name(cls):
    module, name = getattr(cls, "__module__", None), getattr(cls, "__qualname__", cls.__name__)
    return name if module in (None, "builtins", "__main__") else f"{module}.{name}"


def text_of(obj, convert=str, limit=MAX_ERROR_TEXT):
    text = observe(lambda: convert(obj), f"<unprintable {type(obj).__name__} object>")
    half = limit // 2  # both ends matter: a traceback's first frames and its final line
    if len(text) <= limit:
        return text
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def error_frame(kind, type_name, message, traceback_text="", line=0, limit_hint=""):
    return frame_bytes({"type": "done", "ok": False, "error": {
        "kind": kind, "type": type_name, "message": text_of(message), "traceback": text_of(traceback_text),
        "line": line, "limit_hint": limit_hint}})


PROCESS_CREATORS = {"fork", "forkpty", "_fork_exec", "fork_exec", "_execute_child", "posix_spawn",
                    "posix_spawnp", "_posix_spawn", "_launch", "spawn"}
if WINDOWS:  # _winapi.CreateProcess: subprocess's _execute_child, multiprocessing's Popen there
    PROCESS_CREATORS.add("CreateProcess")


def creates_processes(error):
    """True if the innermost frame is a helper that creates processes, or calls os.fork & co."""
    innermost = error.__traceback__
    while innermost is not None and innermost.tb_next is not None:
        innermost = innermost.tb_next
    code = innermost.tb_frame.f_code if innermost else None
    return code is not None and (code.co_name in PROCESS_CREATORS or not PROCESS_CREATORS.isdisjoint(code.co_names))


def limit_hint(error):
    """Names the cap that an exception in the chain most likely hit, or ""."""
    pending, seen = [error], set()
    while pending:
        current = pending.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, MemoryError):
            return "memory_bytes"
        if isinstance(current, OSError) and current.errno == errno.EFBIG:
            return "file_size_bytes"
        if WINDOWS:
            # A job past its active process limit refuses CreateProcess with ERROR_NOT_ENOUGH_QUOTA,
            # which CPython's errno calls ENOMEM. A job counts processes, not threads.
            if isinstance(current, OSError) and current.winerror == 1816 and creates_processes(current):
                return "process_count"
        elif (isinstance(current, OSError) and current.errno == errno.EAGAIN and creates_processes(current)
                or isinstance(current, RuntimeError) and current.args == ("can't start new thread",)):
            return "process_count"  # RLIMIT_NPROC counts threads too
        pending += [current.__cause__, current.__context__]
    return ""


def tool_name_hint(error):
    """For a NameError that names no offered tool but looks like a call of one (close to an
    offered name, or spelled server__tool): the closest offered tools, and that call_tool reaches
    the names an alias cannot spell. "" otherwise."""
    name = getattr(error, "name", None)
    if type(name) is not str or not OFFERED:
        return ""
    import difflib
    close = difflib.get_close_matches(name, OFFERED, n=3, cutoff=0.6)
    if not close and "__" not in name:
        return ""
    unspellable = [tool for tool in OFFERED if not tool.isidentifier()]
    hint = f"; no offered tool is named {name!r}"
    if close:
        hint += f"; the closest offered: {', '.join(close)}"
    hint += " (TOOLS lists them all)"
    example = unspellable[0] if unspellable else (close or OFFERED)[0]
    return hint + (f". A tool whose name is not an identifier has no alias: `await call_tool({example!r}, {{...}})` "
                   f"reaches any offered name")


def describe_exception(error, filename, source):
    import linecache
    import traceback
    if isinstance(error, NameError) and len(error.args) == 1 and type(error.args[0]) is str:
        if hint := observe(lambda: tool_name_hint(error), ""):
            error.args = (error.args[0] + hint,)
    # Registered only now: a traceback needs the program's lines, a success never does.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    traceback.clear_frames(error.__traceback__)  # frame locals: the rest of a MemoryError's memory

    def in_program(tb):
        return tb.tb_frame.f_code.co_filename == filename and tb.tb_frame.f_globals is not BOOTSTRAP_GLOBALS

    first = error.__traceback__
    while first is not None and first.tb_frame.f_globals is BOOTSTRAP_GLOBALS:
        first = first.tb_next  # our own frames
    start = first
    while start is not None and not in_program(start):
        start = start.tb_next  # asyncio's machinery above the program's first frame
    first, line, tb = start or first, 0, start
    while tb is not None:
        line, tb = (tb.tb_lineno or 0) if in_program(tb) else line, tb.tb_next
    error.__traceback__ = without_bootstrap_frames(first)
    pending, seen = [error.__cause__, error.__context__], {id(error)}
    while pending:  # and from the exceptions it was raised from or while handling
        if (chained := pending.pop()) is not None and id(chained) not in seen:
            seen.add(id(chained))
            chained.__traceback__ = without_bootstrap_frames(chained.__traceback__)
            pending += [chained.__cause__, chained.__context__]
    name = qualified_name(type(error))
    text = text_of(error, lambda e: "".join(traceback.format_exception(type(e), e, e.__traceback__)))
    return error_frame("exception", name, text_of(error), text, line, limit_hint(error))


def without_bootstrap_frames(tb):
    """The traceback with none of the bootstrap's frames: the program reached a binding, a
    ToolCall, a refusal through them, and none of that is anything it can change."""
    kept = []
    while tb is not None:
        if tb.tb_frame.f_globals is not BOOTSTRAP_GLOBALS:
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = type(entry)(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def describe_syntax_error(error, source):
    import traceback
    line = (error.lineno or 0) if isinstance(error, SyntaxError) else 0
    if isinstance(error, SyntaxError) and error.text is None and 0 < line <= source.count("\n") + 1:
        error.text = source.splitlines()[line - 1]  # errors found compiling the tree carry no source line
    text = text_of(error, lambda e: "".join(traceback.format_exception_only(type(e), e)))
    return error_frame("syntax_error", qualified_name(type(error)), text_of(error), text, line)


def find_unserializable(item, check_strings, depth=1, ancestors=None):
    """(type name, complaint, path keys innermost first) for what JSON cannot carry, or None.

    Needed even when the C encoder succeeds: it turns int/float/bool/None keys into strings
    and nests without bound. Unlike the encoder, it also says where the problem is.
    """
    if isinstance(item, str):
        if check_strings and raises(lambda: item.encode("utf-8")):
            return "str", "contains a lone surrogate, which UTF-8 cannot encode", []
        return None
    if item is None or isinstance(item, bool):
        return None
    if isinstance(item, int):  # near 4300 digits, ask the conversion itself: the limit is settable
        if item.bit_length() > 14000 and raises(lambda: int.__repr__(item)):
            return "int", (f"is an int with more than {sys.get_int_max_str_digits()} digits, Python's limit "
                           "for writing it as text; return str(n) or a smaller number"), []
        return None
    if isinstance(item, float):
        return None if item - item == 0 else ("float", f"is {item!r}, which JSON cannot represent", [])
    type_name = qualified_name(type(item))
    if type(item) is ToolCall:
        return type_name, f"is a call, not its result: {item._complaint()}", []
    if not isinstance(item, (dict, list, tuple)):
        return type_name, f"is of type {type_name}, which JSON cannot represent", []
    ancestors = set() if ancestors is None else ancestors
    if id(item) in ancestors:
        return type_name, "contains itself (a circular reference)", []
    if depth > MAX_VALUE_DEPTH:
        return type_name, f"is nested deeper than {MAX_VALUE_DEPTH} levels", []
    ancestors.add(id(item))
    is_object, problem = isinstance(item, dict), None
    for key, child in item.items() if is_object else enumerate(item):
        if is_object and not isinstance(key, str):
            key_type = qualified_name(type(key))
            problem = key_type, f"has the key {short_repr(key)} of type {key_type}; JSON object keys must be str", []
            break
        kind = type(child)  # the common scalars are settled here, without a call per element
        if not check_strings and (kind is str or kind is bool or child is None or kind is int
                                  and child.bit_length() <= 14000 or kind is float and child - child == 0):
            continue
        if problem := (check_strings and is_object and find_unserializable(key, True, depth)
                       or find_unserializable(child, check_strings, depth + 1, ancestors)):
            problem[2].append(key)
            break
    ancestors.discard(id(item))
    return problem


def short_repr(obj):
    return text_of(obj, repr, 80)


def value_frame(value):
    """The encoded `done` for a value, or for the reason the value cannot travel."""
    def refuse(type_name, complaint, keys=(), hint=""):
        path = "value" + "".join(f"[{short_repr(key)}]" for key in reversed(keys))
        return error_frame("value_not_serializable", type_name, f"{path} {complaint}", limit_hint=hint)

    try:
        if problem := find_unserializable(value, False):
            return refuse(*problem)
        data = (encode_json({"type": "done", "ok": True, "value": value}) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        surrogate = observe(lambda: find_unserializable(value, True), None)
        return refuse(*(surrogate or ("str", "contains a lone surrogate")))
    except BaseException as error:  # a hostile __repr__ or items(), a MemoryError
        name = qualified_name(type(error))
        return refuse(name, f"could not be encoded: {name}: {text_of(error)}", hint=limit_hint(error))
    if len(data) > MAX_FRAME_BYTES:
        return refuse(qualified_name(type(value)),
                      f"is {len(data)} bytes as JSON; a frame carries at most {MAX_FRAME_BYTES}")
    return data


def raises(action):
    try:
        action()
    except Exception:
        return True
    return False
