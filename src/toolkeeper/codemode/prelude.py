"""The code that runs first inside the sandbox: the script's side of the bridge.

It is handed to a fresh ``python3 -I -S`` as a string and imports nothing at start but
built-in modules (``posix``, ``sys``, ``marshal``): importing ``json``, ``socket`` and
``traceback`` would cost a fresh interpreter ~25 ms on a small host, and even ``os`` (with
``stat``, ``posixpath`` and ``_collections_abc``) about 1 ms of every cold start, so the
script's own ``import os`` pays for it only where it is used. It takes the bridge's fd out of
the environment (``posix.environ``, which ``os.environ`` is copied from, and the process's
own), waits for the start frame (the run's secret, the script and the
callable tools — a pre-started sandbox waits here until a run takes it), defines one function
per tool plus ``call_tool`` and ``search_tools``, runs the script in a fresh namespace and sends
back its ``result``, or the error when it raises.

The script's source is run with ``exec`` of the string, not ``exec(compile(...))``: the
``compile`` builtin's first call builds the interpreter's AST types (it checks whether it was
handed an AST), about 1.2 ms of a cold start that ``exec`` of a string never pays. Its code
objects are therefore named ``<string>``; a traceback sent back says ``<script>``.

Frames are a 4-byte big-endian length and a body. The host writes ``marshal`` (the script side
trusts the host; plain containers, strings, numbers and bytes only); the script writes JSON
(the host trusts nothing from here and parses it with ``json``), encoded by the small encoder
below so that no import is needed.

The interpreter is started with ``BOOT``, not the prelude's source: compiling the prelude took
a fresh interpreter 3–7 ms of every cold start. ``BOOT`` reads the bridge's first frame, which
the host writes before the sandbox starts (``prelude_frame``): the prelude compiled by the
host, with the host's bytecode tag and the source. It runs the compiled prelude when the tags
match (bytecode is stable within a minor version: ``cpython-311`` reads ``cpython-311``'s), and
compiles the source otherwise. Nothing the script sends is read before the prelude runs.
"""

from __future__ import annotations

import functools
import marshal
import sys

__all__ = ["BOOT", "MAX_FRAME", "PRELUDE", "prelude_frame"]

MAX_FRAME = 1 << 20

_SOURCE = r'''
import marshal, posix, sys

def _bridge():
    fd = int(posix.environ.pop(b"TOOLKEEPER_BRIDGE_FD"))
    posix.unsetenv("TOOLKEEPER_BRIDGE_FD")  # nor in what a program it starts inherits
    secret = ""  # comes with the start frame: never in the environment or a command line
    limit = __LIMIT__
    escapes = {i: "\\u%04x" % i for i in range(32)}
    escapes.update({34: '\\"', 92: "\\\\"})
    special = {float("inf"): "Infinity", float("-inf"): "-Infinity"}

    def encode(value, depth=0):
        if depth > 64:
            raise ValueError("a value sent to a tool may nest at most 64 levels")
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if isinstance(value, str):
            return '"' + str.translate(value, escapes) + '"'
        if isinstance(value, int):
            return int.__repr__(value)
        if isinstance(value, float):
            if value != value:
                return "NaN"
            return special.get(value) or float.__repr__(value)
        if isinstance(value, (list, tuple)):
            return "[" + ",".join([encode(item, depth + 1) for item in value]) + "]"
        if isinstance(value, dict):
            return "{" + ",".join([encode(key if isinstance(key, str) else repr(key)) + ":"
                                   + encode(item, depth + 1) for key, item in value.items()]) + "}"
        return encode(repr(value))

    def send(body):
        # a lone surrogate (only ever inside a JSON string) becomes its \\uXXXX escape
        data = ("{" + body + ',"secret":"' + secret + '"}').encode("utf-8", "backslashreplace")
        if len(data) > limit:
            raise ValueError("a call's arguments may be at most %d bytes as JSON" % limit)
        data = len(data).to_bytes(4, "big") + data
        while data:
            data = data[posix.write(fd, data):]

    pending = bytearray()

    def exact(size):
        while len(pending) < size:
            chunk = posix.read(fd, 65536)
            if not chunk:
                raise SystemExit("the host closed the bridge")
            pending.extend(chunk)
        data = bytes(pending[:size])
        del pending[:size]
        return data

    def receive():
        return marshal.loads(exact(int.from_bytes(exact(4), "big")))

    class Result:
        """What a tool call gave: status, text, structured, artifact_ref, files, error_code."""
        __slots__ = ("status", "text", "structured", "artifact_ref", "files", "error_code")

        def __init__(self, data):
            for key in self.__slots__:
                setattr(self, key, data.get(key))

        @property
        def ok(self):
            return self.status == "ok"

        def __repr__(self):
            return "Result(status=%r, text=%r)" % (self.status, self.text)

        def __str__(self):
            return self.text or ""

    counter = [0]

    def answer():
        data = receive()
        for item in data.get("files") or ():
            content = item.pop("data", None)
            if content is not None:
                try:
                    import os  # only for a run that is sent files
                    os.makedirs(os.path.dirname(item["path"]) or ".", exist_ok=True)
                    with open(item["path"], "wb") as out:
                        out.write(content)
                except OSError:
                    pass  # a read-only or full scratch: the file is still listed with its ref
        return data

    def call_tool(name, arguments=None, **keywords):
        """Call a tool by name with a dict of arguments (or keywords)."""
        counter[0] += 1
        payload = dict(arguments or {})
        payload.update(keywords)
        frame = sys._getframe(1)  # the script's line of the call, for the approval card
        while frame is not None and frame.f_globals is not namespace:
            frame = frame.f_back
        send('"type":"call","id":%d,"tool":%s,"arguments":%s,"line":%d'
             % (counter[0], encode(str(name)), encode(payload),
                (frame.f_lineno or 0) if frame is not None else 0))
        return Result(answer())

    def search_tools(query, limit=5):
        """Signatures of the tools that fit ``query`` (for large catalogs)."""
        counter[0] += 1
        send('"type":"search","id":%d,"query":%s,"limit":%d'
             % (counter[0], encode(str(query)), int(limit)))
        return receive().get("signatures", [])

    start = receive()
    secret = start["secret"]
    namespace = {"__name__": "__chain__", "__builtins__": __builtins__,
                 "call_tool": call_tool, "search_tools": search_tools,
                 "WORKSPACE": start.get("workspace")}

    def bind(tool):
        def function(*args, **keywords):
            if args:
                raise TypeError("%s() takes keyword arguments only" % tool)
            return call_tool(tool, keywords)
        function.__name__ = tool
        return function

    for entry in start["tools"]:
        namespace[entry["function"]] = bind(entry["name"])
    try:
        exec(start["code"], namespace)  # a string: no compile() and its AST types (~1.2 ms)
    except BaseException as exc:
        sys.stdout.flush()
        import traceback
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
        text = text.replace('File "<string>"', 'File "<script>"')
        send('"type":"error","error":' + encode(text[-4000:]))
        posix._exit(1)
    sys.stdout.flush()
    try:
        send('"type":"done","value":' + encode(namespace.get("result")))
    except (ValueError, RecursionError) as exc:
        send('"type":"done","value":' + encode("[result not sent: %s]" % exc))

_bridge()
'''
PRELUDE = _SOURCE.replace("__LIMIT__", str(MAX_FRAME))

BOOT = '''import marshal, posix, sys
def _exact(size, fd=int(posix.environ[b"TOOLKEEPER_BRIDGE_FD"])):
    data = b""
    while len(data) < size:
        chunk = posix.read(fd, size - len(data))
        if not chunk:
            raise SystemExit("the host closed the bridge")
        data += chunk
    return data
_tag, _code, _source = marshal.loads(_exact(int.from_bytes(_exact(4), "big")))
del _exact
exec(marshal.loads(_code) if _tag == sys.implementation.cache_tag
     else compile(_source, "<prelude>", "exec"))
'''
"""What the sandbox's interpreter runs (``python3 -I -S -c BOOT``): the prelude sent by the
host in the bridge's first frame, compiled there when the tags match."""


@functools.lru_cache(maxsize=1)
def prelude_frame() -> bytes:
    """The bridge's first frame: (the host's bytecode tag, the prelude compiled by the host,
    the prelude's source), as ``marshal`` of plain values, length first."""
    code = marshal.dumps(compile(PRELUDE, "<prelude>", "exec"))
    body = marshal.dumps((sys.implementation.cache_tag, code, PRELUDE), 4)
    return len(body).to_bytes(4, "big") + body
