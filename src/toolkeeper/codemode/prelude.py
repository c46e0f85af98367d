"""The code that runs first inside the sandbox: the script's side of the bridge.

It is handed to a fresh ``python3 -I -S`` as a string and imports only the standard library.
It takes the bridge socket and the run's secret out of the environment, reads the start frame
(the script and the callable tools), defines one function per tool plus ``call_tool`` and
``search_tools``, runs the script in a fresh namespace, and sends back its ``result`` — or the
error, when it raises. Frames are a 4-byte big-endian length and UTF-8 JSON.
"""

from __future__ import annotations

__all__ = ["MAX_FRAME", "PRELUDE"]

MAX_FRAME = 1 << 20

_SOURCE = r'''
import json, os, socket, struct, sys, traceback

def _bridge():
    fd = int(os.environ.pop("TOOLKEEPER_BRIDGE_FD"))
    secret = os.environ.pop("TOOLKEEPER_BRIDGE_SECRET")
    sock = socket.socket(fileno=fd)
    limit = __LIMIT__

    def send(message):
        message["secret"] = secret
        data = json.dumps(message, default=repr).encode("utf-8")
        if len(data) > limit:
            raise ValueError("a call's arguments may be at most %d bytes as JSON" % limit)
        sock.sendall(struct.pack(">I", len(data)) + data)

    def exact(size):
        chunks = b""
        while len(chunks) < size:
            chunk = sock.recv(size - len(chunks))
            if not chunk:
                raise SystemExit("the host closed the bridge")
            chunks += chunk
        return chunks

    def receive():
        (size,) = struct.unpack(">I", exact(4))
        return json.loads(exact(size))

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

    def call_tool(name, arguments=None, **keywords):
        """Call a tool by name with a dict of arguments (or keywords)."""
        counter[0] += 1
        payload = dict(arguments or {})
        payload.update(keywords)
        send({"type": "call", "id": counter[0], "tool": str(name), "arguments": payload})
        return Result(receive())

    def search_tools(query, limit=5):
        """Signatures of the tools that fit ``query`` (for large catalogs)."""
        counter[0] += 1
        send({"type": "search", "id": counter[0], "query": str(query), "limit": int(limit)})
        return receive().get("signatures", [])

    start = receive()
    namespace = {"__name__": "__chain__", "__builtins__": __builtins__,
                 "call_tool": call_tool, "search_tools": search_tools}

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
        exec(compile(start["code"], "<script>", "exec"), namespace)
    except BaseException as exc:
        sys.stdout.flush()
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
        send({"type": "error", "error": text[-4000:]})
        os._exit(1)
    sys.stdout.flush()
    value = namespace.get("result")
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        value = repr(value)
    send({"type": "done", "value": value})

_bridge()
'''
PRELUDE = _SOURCE.replace("__LIMIT__", str(MAX_FRAME))
