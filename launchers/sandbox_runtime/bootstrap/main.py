# main: one execution from hello to done, and the way out. The last part, so every name the others
# define exists when main() runs. Any failure of the host or the channel ends the child with exit
# code 3 and a line on stderr: there is nobody left to send a frame to.

PROTOCOL_EXIT_CODE = 3
DEFAULT_FILENAME = "<program>"


def execute(source, filename, bindings=(), excluded=()):
    """Runs one program and returns its encoded `done` frame: every failure becomes data."""
    namespace = prepare_interpreter(filename)
    bind_tools(namespace, bindings, excluded)
    try:
        code = compile_program(source, filename)
    except (SyntaxError, ValueError) as error:  # ValueError: NUL bytes or surrogates in the source
        return describe_syntax_error(error, source)
    except BaseException as error:  # RecursionError or MemoryError on a pathological source
        return describe_exception(error, filename, source)
    FLUSHER["stop"] = start_flusher()
    try:
        run_program(code, namespace, source)
    except SystemExit as exit_request:
        exit_code = exit_request.code  # as for a script, only None or integer 0 is a clean exit
        if not (exit_code is None or isinstance(exit_code, int) and exit_code == 0):
            observe(lambda: report_unawaited(namespace), None)
            return describe_exception(exit_request, filename, source)
    except BaseException as error:
        # A program that ran out of memory still holds it all: let its data and our reserve go,
        # or importing traceback to describe the MemoryError fails the same way.
        if not isinstance(error, MemoryError):
            observe(lambda: report_unawaited(namespace), None)
        namespace.clear()
        MEMORY_RESERVE.clear()
        return describe_exception(error, filename, source)
    result = namespace.pop(RESULT_NAME, ())
    observe(lambda: report_unawaited(namespace), None)
    return value_frame(result[0] if type(result) is tuple and len(result) == 1 else None)


def release_program():
    """Before a quick exit: drops the program's globals and collects its cycles, so what shutdown
    would have done for the program's objects (a file left open in a global is flushed and
    closed, a __del__ runs) has happened before `done`, and before the host reads the workspace."""
    import gc
    import _io
    # A file left open inside a reference cycle would otherwise lose its buffer: the collector
    # finalizes a cycle's objects in no useful order, and a raw file closed before its text
    # wrapper drops what the wrapper held. So every open file is flushed first, text layers
    # before the buffers beneath them. gc lists only what the program made (settle() froze ours).
    layers = [obj for obj in gc.get_objects() if isinstance(obj, (_io._TextIOBase, _io._BufferedIOBase))]
    layers.sort(key=lambda layer: not isinstance(layer, _io._TextIOBase))
    for layer in layers:
        observe(layer.flush, None)
    del layers
    observe(PROGRAM_NAMESPACE.clear, None)
    observe(gc.collect, None)


def nothing_left_to_finalize():
    """True when shutdown would do nothing for the program beyond releasing its objects: no thread
    it started is alive (shutdown joins them) and nothing is registered with atexit (logging,
    multiprocessing and tempfile clean-up register there, and their callbacks may still need
    the program's globals). Then the child releases the program itself and ends with _exit,
    which skips the ~1 ms of tearing down the interpreter's own modules."""
    import _thread
    import atexit
    # The flusher's thread counts once it began (and it never ends before stop_flusher): read the
    # count first, so a thread that begins in between can only make the answer "no".
    threads = _thread._count()
    return threads == (1 if FLUSHER["running"] else 0) and atexit._ncallbacks() == 0


def main():
    extras = sys.argv[6:]
    egress = [extra for extra in extras if extra.startswith("egress=") and extra[7:].isdigit()]
    if len(sys.argv) < 6 or len(extras) > 1 or [e for e in extras if e != "prepared" and e not in egress]:
        posix.write(2, b"psych bootstrap: expected TOKEN CANARY IPV4_PORT IPV6_PORT WORKSPACE [prepared|egress=PORT]\n")
        raise SystemExit(PROTOCOL_EXIT_CODE)
    token, canary, ipv4_port, ipv6_port, workspace = sys.argv[1:6]
    prepared = extras == ["prepared"]
    egress_port = int(egress[0][7:]) if egress else 0
    global CHANNEL
    try:
        if not (ipv4_port.isdigit() and ipv6_port.isdigit()):
            raise ProtocolError(f"bad probe ports {ipv4_port!r} {ipv6_port!r}")
        if prepared and WINDOWS:  # its launcher refuses them: a job's limits are the launcher's to set
            raise ProtocolError("a prepared sandbox is not offered on Windows")
        channel = CHANNEL = open_channel()
        report = containment_report(canary, int(ipv4_port), int(ipv6_port), workspace, egress_port)
        channel.send(frame_bytes({"type": "hello", "token": token, "report": report}))
        import_ast()  # while the host grades hello: nothing of the program has arrived yet
        if prepared:
            import resource  # lower_limits' (about 1 ms), loaded while the sandbox waits for its claim
        settle()
        frame = channel.receive()
        if frame["type"] == "lower_limits":  # a prepared sandbox, claimed (docs/pools.md)
            channel.send(frame_bytes(lower_limits(frame.get("rlimits"))))
            frame = channel.receive()
        if frame["type"] == "abort":
            return
        program, filename = frame.get("program"), frame.get("filename")
        if frame["type"] != "run" or type(program) is not str:
            raise ProtocolError(f"expected run or abort, got {frame['type']!r}")
        bindings, excluded = frame.get("bindings"), frame.get("excluded")
        done = execute(program, filename if type(filename) is str and filename else DEFAULT_FILENAME,
                       bindings if type(bindings) is list else (), excluded if type(excluded) is list else ())
        quick_exit = nothing_left_to_finalize()
        if quick_exit:
            release_program()
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            observe(lambda: stream.flush(), None)  # before done: the host may stop reading pipes after it
        stop_flusher()
        channel.send(done)
        channel.finish()
        if quick_exit:
            posix._exit(0)
    except (ProtocolError, OSError) as error:
        complaint = f"psych bootstrap: {error}\n".encode("utf-8", "replace")
        observe(lambda: posix.write(2, complaint), None)
        raise SystemExit(PROTOCOL_EXIT_CODE) from None


main()
