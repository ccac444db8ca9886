# The channel: NDJSON frames over fd 3 (on Windows, a socket the loader's CHANNEL_SHARE names), in
# docs/contract.md's framing. The frames are read and written with _json's C scanner and encoder
# directly: the json package would import re, at a cost every execution pays.

CHANNEL_FD = 3
MAX_INCOMING_LINE, MAX_EMPTY_LINES = 64 << 20, 1000


def refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def refuse_duplicate_keys(pairs):
    if len(obj := dict(pairs)) != len(pairs):
        raise ValueError("duplicate key")
    return obj


class ScannerSettings:
    """What _json.make_scanner reads from a json.JSONDecoder, without importing json (and re)."""
    strict, object_hook, parse_float, parse_int = True, None, float, int
    object_pairs_hook, parse_constant = staticmethod(refuse_duplicate_keys), staticmethod(refuse_constant)


SCAN_JSON = _json.make_scanner(ScannerSettings())


def refuse_unknown_type(obj):
    raise TypeError(f"{qualified_name(type(obj))} is not JSON serializable")


def new_encoder():
    # encode_basestring, not the _ascii variant: text travels as UTF-8, not \u escapes.
    return _json.make_encoder({}, refuse_unknown_type, _json.encode_basestring, None, ":", ",", False, False, False)


ENCODER = [new_encoder()]
ENCODE_STRING = _json.encode_basestring  # made once: making one costs more than encoding a small frame


def encode_json(value):
    try:
        return "".join(ENCODER[0](value, 0))
    except BaseException:
        ENCODER[0] = new_encoder()  # a failed encoding can leave its circularity markers behind
        raise


def frame_bytes(frame):
    # Reports may hold surrogate-escaped bytes (paths, messages): replace them, never fail.
    return (encode_json(frame) + "\n").encode("utf-8", "replace")


# Below malloc's mmap threshold: a 1 MiB read buffer is an mmap, a page fault and an mremap on
# every read, which cost a small frame's round trip several times over.
READ_CHUNK = 64 << 10


def parse_frame(line):
    try:
        text = line.decode("utf-8")
        frame, end = SCAN_JSON(text, 0)
    except Exception as error:  # the C scanner raises StopIteration/ValueError/SystemError
        raise ProtocolError(f"malformed frame ({type(error).__name__})") from None
    if end != len(text) or type(frame) is not dict or type(frame.get("type")) is not str:
        raise ProtocolError("frame is not one object with a string type")
    return frame


class Channel:
    def __init__(self, fd):
        self.fd, self.pending = fd, bytearray()  # pending keeps the bytes past one frame

    def read_some(self):
        return posix.read(self.fd, READ_CHUNK)

    def finish(self):  # after done: nothing to do for a descriptor the kernel closes with the process
        pass

    def write_some(self, view):
        return posix.write(self.fd, view)

    def send(self, data):
        view = memoryview(data)
        try:
            while view:
                view = view[self.write_some(view):]
        except OSError as error:
            raise ProtocolError(f"cannot write to the channel: {error}") from None

    def receive(self):
        for _ in range(MAX_EMPTY_LINES + 1):
            if line := self.read_line().strip(b" \t\r"):
                return parse_frame(line)
        raise ProtocolError("too many empty lines")

    def receive_ready(self):
        """The frames that one read completes, without blocking: for a reader the event loop
        calls when the channel is readable. Partial frames wait in `pending` for the next read."""
        if not (chunk := self.read_some()):
            raise ProtocolError("channel closed with calls in flight")
        self.pending += chunk
        frames = []
        while (newline := self.pending.find(b"\n")) >= 0:
            line = bytes(self.pending[:newline]).strip(b" \t\r")
            del self.pending[:newline + 1]
            if line:
                frames.append(parse_frame(line))
        if len(self.pending) > MAX_INCOMING_LINE:
            raise ProtocolError("frame too large")
        return frames

    def read_line(self):
        scanned = 0  # never search the same bytes twice: a long line stays linear
        while (newline := self.pending.find(b"\n", scanned)) < 0:
            if (scanned := len(self.pending)) > MAX_INCOMING_LINE:  # bounded as the bytes arrive
                raise ProtocolError("frame too large")
            if not (chunk := self.read_some()):
                raise ProtocolError("channel closed before a complete frame")
            self.pending += chunk
        if newline > MAX_INCOMING_LINE:
            raise ProtocolError("frame too large")
        line = bytes(self.pending[:newline])
        del self.pending[:newline + 1]
        return line


class SocketChannel(Channel):
    """Windows: the channel is the host's connection itself, shared with this process
    (docs/contract.md, "Channels on Windows"); the C runtime's read and write take no socket.
    `fd` is its handle, which a SelectorEventLoop watches as it watches fd 3 elsewhere."""

    def __init__(self, share):
        import _socket
        self.sock = _socket.socket(0, 0, 0, share)  # socket.fromshare, without importing socket
        # fromshare makes the socket with WSASocketW and no WSA_FLAG_NO_HANDLE_INHERIT: processes
        # the program starts with inherited handles (os.system, os.spawn*) must not hold it.
        posix.set_handle_inheritable(self.sock.fileno(), False)
        self.sock.setblocking(True)  # whatever mode the launcher's copy was in: reads wait for a frame
        super().__init__(self.sock.fileno())

    def read_some(self):
        return self.sock.recv(READ_CHUNK)

    def finish(self):
        # Windows resets a TCP connection closed with unread bytes (results of calls the program
        # gave up on), and a reset can overtake `done` on its way to the host: end the sending side
        # with a FIN behind `done`, then take what has already arrived, without waiting for more.
        try:
            self.sock.shutdown(1)  # SD_SEND
            self.sock.setblocking(False)
            while self.sock.recv(READ_CHUNK):
                pass
        except OSError:  # WSAEWOULDBLOCK: nothing more is queued; or the host has already gone
            pass

    def write_some(self, view):
        return self.sock.send(view)


def open_channel():
    if not WINDOWS:
        posix.set_inheritable(CHANNEL_FD, False)  # processes the program starts must not hold it
        return Channel(CHANNEL_FD)
    share = BOOTSTRAP_GLOBALS.get("CHANNEL_SHARE")  # set by the Windows loader; see the note at the top of prelude.py
    if type(share) is not bytes:
        raise ProtocolError("no channel was handed over (CHANNEL_SHARE is not set)")
    return SocketChannel(share)
