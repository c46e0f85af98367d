"""A relayed resource's URI in its normal form (RFC 3986, section 6.2.2), so that what a policy
tests is what the upstream is asked for: ``toolkeeper://mcp/up/FILE:///notes/./x%2Ey`` is read,
and judged, as ``toolkeeper://mcp/up/file:///notes/x.y``. A ``like`` prefix on a URI then holds
against the spellings that name the same resource: the scheme's and the host's case,
percent-encoded letters, digits and ``-._~``, ``.`` and ``..`` segments, and in a ``file:`` path
an escaped slash and repeated slashes."""

from __future__ import annotations

import re

__all__ = ["normal_uri"]

_PARTS = re.compile(r"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):)?(?://(?P<authority>[^/?#]*))?"
                    r"(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?", re.S)
"""RFC 3986's own split of a URI (appendix B): each part, and whether it was there."""
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def normal_uri(uri: str, prefix: str = "") -> str:
    """``uri`` normalized after ``prefix`` (kept as it is); a URI that cannot be split is
    returned unchanged (the upstream refuses it as it would)."""
    if not uri.startswith(prefix):
        return uri
    head, inner = uri[:len(prefix)], uri[len(prefix):]
    if prefix:  # the upstream's name, then its own URI
        name, slash, inner = inner.partition("/")
        head += name + slash
    parts = _PARTS.fullmatch(inner)
    if parts is None or parts["scheme"] is None:
        return uri
    scheme = parts["scheme"].lower()
    path = parts["path"]
    if scheme == "file":  # a file's path: an escaped slash is a slash to the server reading it
        path = re.sub(r"%2[Ff]", "/", path)
    path = _dots_removed(_unescaped(path))
    if scheme == "file":
        path = re.sub(r"/{2,}", "/", path)
    authority = parts["authority"]
    if authority is not None and "@" not in authority:  # a host's case does not matter; a
        authority = authority.lower()  # user's may
    return (head + scheme + ":" + ("" if authority is None else "//" + _unescaped(authority))
            + path + ("" if parts["query"] is None else "?" + _unescaped(parts["query"]))
            + ("" if parts["fragment"] is None else "#" + _unescaped(parts["fragment"])))


def _unescaped(text: str) -> str:
    """``%XX`` of an unreserved character as the character; any other in upper case."""
    def one(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()
    return _ESCAPE.sub(one, text)


def _dots_removed(path: str) -> str:
    """RFC 3986's remove_dot_segments (5.2.4)."""
    out: list[str] = []
    while path:
        if path.startswith("../"):
            path = path[3:]
        elif path.startswith(("./", "/./")):
            path = path[2:]
        elif path == "/.":
            path = "/"
        elif path.startswith("/../"):
            path = path[3:]
            if out:
                out.pop()
        elif path == "/..":
            path = "/"
            if out:
                out.pop()
        elif path in (".", ".."):
            path = ""
        else:
            start = 1 if path.startswith("/") else 0
            end = path.find("/", start)
            end = len(path) if end < 0 else end
            out.append(path[:end])
            path = path[end:]
    return "".join(out)
