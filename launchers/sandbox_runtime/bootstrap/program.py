# The program: parse, rewrite, compile, run. Its top-level `return` becomes a break out of a loop of
# ours, its last expression its value, and it runs as __main__ with installed packages on sys.path,
# without site. Nothing here is parsed before `run` arrives.

PYCF_ONLY_AST, PYCF_ALLOW_TOP_LEVEL_AWAIT, CO_COROUTINE = 0x400, 0x2000, 0x80
RESULT_NAME = "__psych_result__"  # (value,) once the program returned or ended on an expression
PROGRAM_NAMESPACE = {}  # the program's globals, once prepare_interpreter made them


def located(node_type, at, **fields):
    return node_type(**fields, lineno=at.lineno, col_offset=at.col_offset,
                     end_lineno=at.end_lineno, end_col_offset=at.end_col_offset)


def store_result(at, value):
    return located(_ast.Assign, at, targets=[located(_ast.Name, at, id=RESULT_NAME, ctx=_ast.Store())],
                   value=located(_ast.Tuple, at, elts=[value], ctx=_ast.Load()))


class StrayLoopControl(Exception):  # a break/continue outside every loop, which our loop would make legal
    pass


def import_ast():
    """The AST node types every program's rewrite needs; see the note at the top of prelude.py on when."""
    global _ast, LOOPS
    import _ast
    LOOPS = (_ast.For, _ast.AsyncFor, _ast.While)


def rewrite_returns(block, in_loop):
    """Turns each top-level `return X` into `__psych_result__ = (X,); break`; says if any.

    The program runs inside a `while True:` of ours, so `break` leaves it as a return leaves a
    function: with-blocks exit cleanly (sqlite3 commits, a TaskGroup waits), finally-blocks
    run, a return in finally wins and no `except:` catches it, all of which a raised exception
    gets wrong. A return in a user's loop breaks that loop and a check after it breaks on out.
    """
    rewritten, returns = [], False
    for node in block:
        if isinstance(node, _ast.Return):
            value = node.value or located(_ast.Constant, node, value=None)
            rewritten += [store_result(node, value), located(_ast.Break, node)]
            returns = True
            continue
        if isinstance(node, (_ast.Break, _ast.Continue)) and not in_loop:
            raise StrayLoopControl()
        rewritten.append(node)
        if isinstance(node, (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)):
            continue
        inner = False
        for field in ("body", "orelse", "finalbody"):  # a loop's else clause is outside that loop
            if getattr(node, field, None):
                new_block, found = rewrite_returns(getattr(node, field), in_loop or (
                    field == "body" and isinstance(node, LOOPS)))
                setattr(node, field, new_block)
                inner |= found
        for clause in getattr(node, "handlers", []) + getattr(node, "cases", []):
            clause.body, found = rewrite_returns(clause.body, in_loop)
            inner |= found
        if inner and isinstance(node, LOOPS):
            rewritten.append(located(_ast.If, node, test=located(_ast.Name, node, id=RESULT_NAME, ctx=_ast.Load()),
                                     body=[located(_ast.Break, node)], orelse=[]))
        returns |= inner
    return rewritten, returns


def compile_program(source, filename):
    tree = compile(source, filename, "exec", PYCF_ONLY_AST | PYCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    body = tree.body
    if body and isinstance(body[-1], _ast.Expr):
        body[-1] = store_result(body[-1], body[-1].value)
    # A docstring and `from __future__` imports must come first, so they stay outside the loop.
    start = 1 if len(body) > 1 and isinstance(body[0], _ast.Expr) and isinstance(body[0].value, _ast.Constant) else 0
    while start < len(body) and isinstance(body[start], _ast.ImportFrom) and body[start].module == "__future__":
        start += 1
    try:
        rest, returns = rewrite_returns(body[start:], False)
    except StrayLoopControl:  # let the compiler name the program's first error, as Python would
        compile(source, filename, "exec", PYCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        raise SyntaxError("'break' outside loop") from None
    if returns:
        tree.body = body[:start] + [located(_ast.While, rest[0], test=located(_ast.Constant, rest[0], value=True),
                                            body=rest + [located(_ast.Break, rest[-1])], orelse=[])]
    return compile(tree, filename, "exec", PYCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


def settle():
    """Hands everything that exists before the program to the GC's permanent generation. It all
    lives until exit, yet every full collection walked it again, the ones at shutdown included
    (~1.3 ms of each execution). What the program creates is collected as usual; the one visible
    difference is that gc.get_objects() and gc.get_referrers() no longer list these objects."""
    import gc
    gc.freeze()


def exit_program(code=None):
    """site's exit() and quit(): programs call them, and -S leaves them undefined."""
    raise SystemExit(code)


def prepare_interpreter(filename):
    """Gives the program installed packages and a real __main__, without paying for site."""
    global PROGRAM_NAMESPACE
    version = "python%d.%d" % sys.version_info[:2]
    if WINDOWS:  # where site puts them there, beside the standard library's Lib
        candidates = [sys.prefix + "\\Lib\\site-packages"]
    else:
        candidates = [f"{sys.prefix}/lib/{version}/site-packages"]
    if sys.prefix == "/usr":  # Debian's own interpreter keeps them in dist-packages
        candidates += [f"/usr/local/lib/{version}/dist-packages", "/usr/lib/python3/dist-packages",
                       f"/usr/lib/{version}/dist-packages"]
    for path in candidates:  # no .pth files: processing them is site's job, and its cost
        if path not in sys.path and observe(lambda: posix.stat(path).st_mode & 0o170000 == 0o040000, False):
            sys.path.append(path)
    key = "PYTHONDONTWRITEBYTECODE" if WINDOWS else b"PYTHONDONTWRITEBYTECODE"  # nt.environ's keys are str
    if posix.environ.get(key):  # -I ignores it, but the launch still asked
        sys.dont_write_bytecode = True
    sys.argv = [filename]
    if WINDOWS:  # a line ends with "\n" as on every backend, not os.linesep's "\r\n" (docs/contract.md)
        for stream in (sys.stdout, sys.stderr):
            observe(lambda: stream.reconfigure(newline="\n"), None)
    builtins.exit = builtins.quit = exit_program
    setattr(builtins, RESULT_NAME, ())  # what the after-loop checks read before any return ran
    main_module = type(sys)("__main__")  # so pickle and `import __main__` find the program's names
    main_module.__builtins__ = builtins
    sys.modules["__main__"] = main_module
    PROGRAM_NAMESPACE = main_module.__dict__
    return PROGRAM_NAMESPACE


def run_program(code, namespace, source):
    coroutine = eval(code, namespace)
    if not code.co_flags & CO_COROUTINE:
        return
    # asyncio costs ~50 ms to import. A program that imports nothing (no `import`, no
    # `__import__`, no importlib) cannot await anything that needs a loop, as long as the
    # host's bindings stay loop-free, so its coroutine is driven by hand instead.
    if "import" in source:
        import asyncio
        if WINDOWS:  # asyncio.run's loop there is a ProactorEventLoop, which cannot watch the channel
            with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
                return runner.run(coroutine)
        return asyncio.run(coroutine)
    try:
        yielded = coroutine.send(None)
        while True:  # a bare yield (asyncio.sleep(0)) only means "let others run": there are none
            yielded = coroutine.send(None) if yielded is None else coroutine.throw(RuntimeError(
                "awaited something that needs an event loop; one runs only when the program "
                "imports asyncio (or the library it awaits)"))
    except StopIteration:
        pass
