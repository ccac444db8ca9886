# Output: what the program prints reaches the host's pipes while it runs, flushed by a thread every
# FLUSH_INTERVAL_SECONDS, so a program ended early loses at most that much of it (docs/output.md).
# benchmarks/output_flush.cpp finds the line below by its text to turn the flusher off.

FLUSH_INTERVAL_SECONDS = 0.05  # stdout/stderr reach the host at least this often (start_flusher); 0: never
FLUSHER = {"stop": None, "running": False}  # the lock that stops the flusher; whether its thread began


def start_flusher(interval=FLUSH_INTERVAL_SECONDS):
    """Starts a thread that flushes stdout and stderr every `interval` seconds, so that a program
    ended by the wall clock or a cancel has lost at most the last interval of its output, not a
    whole buffer (docs/output.md). A thread, not a signal: it works while the program sleeps or
    blocks in C code that releases the GIL, and whatever the program does with signals; a
    pure-Python loop that holds the GIL yields it every switch interval (5 ms). It flushes only
    the interpreter's own C stream types, which lock themselves; a stream object the program made
    in Python is never called from another thread. A fork waits for a flush in progress to end, so
    a child never inherits a stream's lock held by a thread it does not have. None if the thread
    cannot start (process_count reached): then output is flushed at the end only, as before."""
    if interval <= 0:
        return None
    import _thread
    import _io
    stop, guard, flushable = _thread.allocate_lock(), _thread.allocate_lock(), (_io.TextIOWrapper, _io.BufferedWriter)
    stop.acquire()

    def flush_every_interval():
        FLUSHER["running"] = True
        while not stop.acquire(True, interval):
            try:
                with guard:
                    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                        if type(stream) in flushable:
                            try:
                                stream.flush()
                            except Exception:  # closed, or a write the program's own flush will report
                                pass
            except BaseException:
                pass

    if WINDOWS:
        # Neither the mask nor the fork guard below: Windows never hands a signal to a thread of its
        # choosing (a console event gets a thread of its own, and CPython runs every handler on the
        # main thread), and it has no fork to copy a stream's lock the flusher holds into a child.
        try:
            _thread.start_new_thread(flush_every_interval, ())
        except RuntimeError:
            return None
        return stop
    # Born with every signal blocked, so a signal sent to the process still goes to the program's
    # threads: one the program blocks (SIGXCPU, SIGTERM) stays pending instead of being taken by the
    # flusher, whose default action would end the process.
    import _signal
    mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
    try:
        _thread.start_new_thread(flush_every_interval, ())
    except RuntimeError:
        return None
    finally:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
    posix.register_at_fork(before=guard.acquire, after_in_parent=guard.release, after_in_child=guard.release)
    return stop


def stop_flusher():
    if FLUSHER["stop"] is not None:
        FLUSHER["stop"].release()
        FLUSHER["stop"] = None
