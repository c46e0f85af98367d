"""Text as a reviewer reads it on a card: numbered lines that wrap (nothing needs horizontal
scrolling), every character shown or accounted for, and odd characters flagged where they are.

- Control, bidi, zero-width, separator and other invisible characters (everything
  ``str.isprintable`` refuses but a tab, and the blank-looking letters and marks it accepts,
  ``BLANK_LOOKING``) are written as escapes (``\\u202e``), marked, and listed with their
  place: ``line 17, col 4: U+202E RIGHT-TO-LEFT OVERRIDE``. The edit box uses the same set.
- Other non-ASCII characters are shown as they are, marked, and listed the same way (with the
  ASCII letter they look like, for the usual look-alikes).
- Nothing is cut silently: past ``SHOWN_LINES`` lines (or ``SHOWN_CHARS`` characters) the rest
  of a block is folded, and past ``LONG_LINE`` characters the rest of a line is; a fold says what
  it holds and opens with one click. Past ``MAX_FLAGS`` the flag list says how many it does not
  list (each of those is still marked in the text).
- A card in the inbox renders at most ``INLINE_LINES`` lines and ``INLINE_CHARS`` characters
  over all its blocks (an ``Inline`` budget): the rest is not rendered at all, and the block
  says how much is left out (its odd characters still counted), so one call with megabytes of
  arguments cannot make every refresh of every tab slow. The request's own page renders all.

The HTML is built here, not in a template, because a 5 MB value is tens of thousands of lines:
every piece of text goes through ``html.escape`` (``_Marker`` is the only place that writes
markup), and the templates insert it with ``|safe``.
"""

from __future__ import annotations

import difflib
import html
import itertools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..extras import missing

__all__ = ["BLANK_LOOKING", "Block", "Flag", "Inline", "Line", "Part", "diff_block", "plain",
           "rows_block", "shown_as_is", "text_block", "url_block"]

SHOWN_LINES = 400
SHOWN_CHARS = 100_000
LONG_LINE = 5_000
MAX_FLAGS = 50
CONTEXT = 3
WBR = 2_000
DIFF_MAX_LINES = 20_000
DIFF_MAX_CHARS = 4_000_000
INLINE_LINES = 2_000
INLINE_CHARS = 250_000
MARK = "▶"
"""The sign of the line a text block points at."""

_ODD = re.compile(r"[^\t\x20-\x7e]+")
BLANK_LOOKING = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u2800\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10))) + "".join(map(chr, range(0xE0100, 0xE01F0))))
"""Characters ``str.isprintable`` accepts that show as nothing or as blank space: the Hangul
fillers (U+115F, U+1160, U+3164, U+FFA0), the Braille blank (U+2800), the combining grapheme
joiner, Khmer's inherent vowels, variation selectors. A card and the edit box escape them like
the invisible ones."""


def shown_as_is(char: str) -> bool:
    """Whether a card or the edit box shows ``char`` itself (not as its escape)."""
    return char.isprintable() and char not in BLANK_LOOKING
# Letters of other scripts that read as Latin ones (fullwidth and mathematical forms are found
# by NFKC instead).
_LOOKALIKES = dict(zip("аеорсухіјѕԁӏһԛԝвкмнтАВЕКМНОРСТХУІЈЅΑΒΕΖΗΙΚΜΝΟΡΤΥΧοντ",
                       "aeopcyxijsdlhqwBKMHTABEKMHOPCTXYIJSABEZHIKMNOPTYXovt", strict=True))


def _html(text: str) -> str:
    """``text`` escaped, with a ``<wbr>`` every ``WBR`` characters: chromium stops wrapping a
    text node of a few million characters (measured: 5 MB of one letter laid out 5.5 million
    pixels wide), and a break opportunity adds no text."""
    if len(text) <= WBR:
        return html.escape(text)
    return "<wbr>".join(html.escape(text[i:i + WBR]) for i in range(0, len(text), WBR))


def _escape(char: str) -> str:
    return char.encode("unicode_escape", errors="backslashreplace").decode("ascii")


def describe(char: str) -> str:
    """``U+0430 CYRILLIC SMALL LETTER A (looks like 'a')``."""
    text = f"U+{ord(char):04X} {unicodedata.name(char, 'UNNAMED CHARACTER')}"
    like = _LOOKALIKES.get(char)
    if like is None:
        folded = unicodedata.normalize("NFKC", char)
        like = folded if folded != char and folded.isascii() and folded.isprintable() else None
    return f"{text} (looks like {like!r})" if like else text


def plain(text: str) -> str:
    """One-line text with every invisible character written as an escape (for names, reasons
    and messages; the template escapes the rest)."""
    if text.isprintable() and BLANK_LOOKING.isdisjoint(text):
        return text
    return "".join(c if shown_as_is(c) else _escape(c) for c in text)


@dataclass(frozen=True)
class Flag:
    """One odd character, where it is."""

    where: str
    what: str
    anchor: str
    invisible: bool


@dataclass(frozen=True)
class Line:
    """One line: its numbers (``old`` in a diff), its HTML, and the rest of a very long line."""

    html: str
    number: str = ""
    old: str = ""
    sign: str = ""
    anchor: str = ""
    flagged: bool = False
    more_html: str = ""
    more_note: str = ""


@dataclass(frozen=True)
class Part:
    """Lines shown together; ``folded`` (what they are) puts them behind one click."""

    lines: list[Line]
    folded: str = ""


@dataclass
class Block:
    """A rendered section: text, diff or rows (then each line's ``number`` is the row's key)."""

    kind: str
    title: str
    summary: str = ""
    parts: list[Part] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    unlisted: int = 0
    counts: str = ""
    note: str = ""
    headline: str = ""
    """HTML of a request's one-line summary (method, URL with the host emphasised)."""
    cut: str = ""
    """What an ``Inline`` budget left out of this block (empty: nothing)."""


@dataclass
class Inline:
    """What one card may still render inline (lines and characters, over all its blocks), and
    how much it left out."""

    lines: int = INLINE_LINES
    chars: int = INLINE_CHARS
    cut_lines: int = 0
    cut_chars: int = 0

    def fit(self, sizes: Sequence[int]) -> tuple[int, int]:
        """Of lines of these ``sizes``: how many render whole, and how many characters of the
        next one (0: none of it)."""
        for n, size in enumerate(sizes):
            if self.lines <= 0 or self.chars <= 0:
                return n, 0
            if size > self.chars:
                part, self.lines, self.chars = self.chars, self.lines - 1, 0
                return n, part
            self.lines, self.chars = self.lines - 1, self.chars - size
        return len(sizes), 0

    def cut(self, marker: _Marker, rest: Sequence[str], done: int, what: str, start: str
            ) -> str:
        """Count ``rest`` (the first ``done`` characters of it shown) as left out, its odd
        characters as flagged, and say what is missing."""
        if not rest:
            return ""
        chars = sum(map(len, rest)) - done
        whole = len(rest) - (1 if done else 0)
        odd = marker.tally(rest[0][done:]) + sum(marker.tally(t) for t in rest[1:])
        self.cut_lines, self.cut_chars = self.cut_lines + whole, self.cut_chars + chars
        said = (f"the rest of {start} and {whole:,} more {what}" if done and whole else
                f"the rest of {start}" if done else f"{whole:,} more {what} (from {start})")
        flagged = f", with {odd:,} flagged characters" if odd else ""
        return f"Not shown here: {said}, {chars:,} characters{flagged}"

    def trim(self, parts: list[Part], what: str) -> tuple[list[Part], str]:
        """Rendered ``parts`` cut to the budget (a diff's), and what was left out."""
        kept: list[Part] = []
        for index, part in enumerate(parts):
            whole, _ = self.fit([len(ln.html) + len(ln.more_html) for ln in part.lines])
            if whole < len(part.lines):
                kept += [Part(part.lines[:whole], part.folded)] if whole else []
                rest = part.lines[whole:] + [ln for p in parts[index + 1:] for ln in p.lines]
                self.cut_lines += len(rest)
                self.cut_chars += sum(len(ln.html) + len(ln.more_html) for ln in rest)
                return kept, f"Not shown here: {len(rest):,} more {what} (from {_label(rest[0])})"
            kept.append(part)
        return kept, ""


class _Marker:
    """Escapes and marks lines of one block, and collects its flags."""

    def __init__(self) -> None:
        self.flags: list[Flag] = []
        self.unlisted = self.invisible = self.other = 0

    def html(self, text: str, where: str, start: int, anchor: str) -> tuple[str, bool]:
        """``text`` (from column ``start`` + 1 of ``where``) as HTML; whether it had odd characters."""
        out: list[str] = []
        pos = 0
        for match in _ODD.finditer(text):
            out.append(_html(text[pos:match.start()]))
            pos = match.end()
            column = start + match.start() + 1
            for printable, chars in itertools.groupby(match.group(), shown_as_is):
                run = "".join(chars)
                out.append(self._mark(run, "na" if printable else "esc", where, column, anchor))
                column += len(run)
        out.append(_html(text[pos:]))
        return "".join(out), len(out) > 1

    def _mark(self, run: str, kind: str, where: str, column: int, anchor: str) -> str:
        invisible = kind == "esc"
        shown = _escape(run) if invisible else run
        names = [describe(c) for c in dict.fromkeys(run[:200])][:3]
        title = ", ".join(names) + (" …" if len(set(run)) > 3 else "")
        for offset, char in enumerate(run):
            if len(self.flags) >= MAX_FLAGS:
                self.unlisted += len(run) - offset
                break
            self.flags.append(Flag(f"{where}, col {column + offset}", describe(char), anchor,
                                   invisible))
        if invisible:
            self.invisible += len(run)
        else:
            self.other += len(run)
        return (f'<mark class="{kind}" title="{html.escape(title)}">'
                f"{_html(shown)}</mark>")

    def tally(self, text: str) -> int:
        """Count the odd characters of text left out (not listed, not rendered)."""
        found = 0
        for match in _ODD.finditer(text):
            for char in match.group():
                found += 1
                if shown_as_is(char):
                    self.other += 1
                else:
                    self.invisible += 1
        self.unlisted += found
        return found

    def line(self, text: str, *, where: str, anchor: str, number: str = "", old: str = "",
             sign: str = "") -> Line:
        head, tail = text[:LONG_LINE], text[LONG_LINE:]
        shown, odd = self.html(head, where, 0, anchor)
        if not tail:
            return Line(shown, number, old, sign, anchor, odd)
        rest, odd_rest = self.html(tail, where, LONG_LINE, anchor)
        note = (f"{where} goes on for {len(tail):,} more characters (columns "
                f"{LONG_LINE + 1:,}–{len(text):,}): open to read them")
        return Line(shown, number, old, sign, anchor, odd or odd_rest, rest, note)

    def finish(self, block: Block) -> Block:
        block.flags, block.unlisted = self.flags, self.unlisted
        counts = []
        if self.invisible:
            counts.append(f"{self.invisible:,} invisible, control or bidi character"
                          f"{'s' if self.invisible > 1 else ''} (shown as escapes)")
        if self.other:
            counts.append(f"{self.other:,} other non-ASCII character"
                          f"{'s' if self.other > 1 else ''} (check for look-alikes)")
        block.counts = "; ".join(counts)
        return block


def _lines_of(text: str) -> list[str]:
    """Lines split on ``\\n`` only (other breaks are characters to flag); a final newline ends
    the last line rather than starting an empty one."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def _budget(parts: list[Part], what: str, *, numbered: bool = True) -> list[Part]:
    """Fold everything past ``SHOWN_LINES`` lines or ``SHOWN_CHARS`` characters of the shown
    parts into one last fold, saying how much it holds."""
    kept: list[Part] = []
    lines = chars = 0
    for index, part in enumerate(parts):
        if part.folded:
            kept.append(part)
            continue
        for cut, line in enumerate(part.lines):
            lines += 1
            chars += len(line.html)
            if lines > SHOWN_LINES or chars > SHOWN_CHARS:
                if cut:
                    kept.append(Part(part.lines[:cut]))
                rest = part.lines[cut:] + [ln for p in parts[index + 1:] for ln in p.lines]
                start = f" (from {_label(rest[0])})" if numbered else ""
                kept.append(Part(rest, f"the other {len(rest):,} {what}{start}: open to "
                                       "read them"))
                return kept
        kept.append(part)
    return kept


def _label(line: Line) -> str:
    return f"line {line.number}" if line.number else f"old line {line.old}"


def text_block(title: str, text: str, *, anchor: str, note: str = "",
               marked: int | None = None, inline: Inline | None = None) -> Block:
    """A titled text with numbered lines (line ``marked`` pointed at); with ``inline``, only
    what its budget still allows."""
    marker = _Marker()
    lines = _lines_of(text)
    whole, part = inline.fit([len(t) for t in lines]) if inline else (len(lines), 0)
    shown = [*lines[:whole], lines[whole][:part]] if part else lines[:whole]
    rendered = [marker.line(t, where=f"line {n}", anchor=f"{anchor}-L{n}", number=str(n),
                            sign=MARK if n == marked else "")
                for n, t in enumerate(shown, 1)]
    summary = (f"{len(lines):,} line{'s' if len(lines) != 1 else ''}, "
               f"{len(text):,} character{'s' if len(text) != 1 else ''}")
    block = Block("text", title, summary, _budget([Part(rendered)] if rendered else [],
                                                  "lines"), note=note)
    if inline is not None:
        block.cut = inline.cut(marker, lines[whole:], part, "lines", f"line {whole + 1:,}")
    return marker.finish(block)


def rows_block(title: str, rows: list[tuple[str, str]], *, anchor: str, note: str = "",
               inline: Inline | None = None) -> Block:
    """Key/value rows: each value wraps like a line; keys are marked the same way; with
    ``inline``, only what its budget still allows."""
    marker = _Marker()
    rendered = []
    whole, part = inline.fit([len(k) + len(v) for k, v in rows]) if inline else (len(rows), 0)
    shown = [*rows[:whole], (rows[whole][0], rows[whole][1][:part])] if part else rows[:whole]
    for n, (key, value) in enumerate(shown, 1):
        key_html, _ = marker.html(key, f"name of {plain(key)}", 0, f"{anchor}-R{n}")
        line = marker.line(value, where=plain(key), anchor=f"{anchor}-R{n}")
        rendered.append(Line(line.html, key_html, "", "", line.anchor, line.flagged,
                             line.more_html, line.more_note))
    block = Block("rows", title, "", _budget([Part(rendered)] if rendered else [], "rows",
                                             numbered=False), note=note)
    if inline is not None:
        rest = [v if n == whole and part else k + v for n, (k, v) in enumerate(rows[whole:],
                                                                               whole)]
        start = plain(rows[whole][0]) if whole < len(rows) else ""
        block.cut = inline.cut(marker, rest, part, "rows", start)
    return marker.finish(block)


def diff_block(title: str, old: str | None, new: str, *, anchor: str, note: str = "",
               inline: Inline | None = None) -> Block:
    """``new`` against ``old`` (``None``: nothing to compare with, every line is added), with
    runs of unchanged lines folded. Line numbers are the new file's (``old`` for removed)."""
    marker = _Marker()
    new_lines = _lines_of(new) if new else []
    old_lines = _lines_of(old) if old else []
    notes = [note] if note else []
    if old is not None and (old.endswith("\n") != new.endswith("\n")) and old and new:
        notes.append("the old text ends with a newline and the new one does not"
                     if old.endswith("\n") else
                     "the new text ends with a newline and the old one does not")
    big = (len(old_lines) + len(new_lines) > DIFF_MAX_LINES
           or len(old or "") + len(new) > DIFF_MAX_CHARS)
    ops: Sequence[tuple[str, int, int, int, int]]
    if old is None or big:
        if old is not None:
            notes.append(f"not compared: too large to compare on the page ({len(old_lines):,} "
                         f"and {len(new_lines):,} lines); every new line is shown as added")
        ops = [("insert", 0, 0, 0, len(new_lines))]
    else:
        matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
        ops = matcher.get_opcodes()

    def line(sign: str, i: int | None, j: int | None) -> Line:
        text = old_lines[i] if j is None and i is not None else new_lines[j or 0]
        where = f"line {j + 1}" if j is not None else f"old line {(i or 0) + 1}"
        tag = f"{anchor}-L{j + 1}" if j is not None else f"{anchor}-O{(i or 0) + 1}"
        return marker.line(text, where=where, anchor=tag, sign=sign,
                           number=str(j + 1) if j is not None else "",
                           old=str(i + 1) if i is not None else "")

    parts: list[Part] = []
    shown: list[Line] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            pairs = list(zip(range(i1, i2), range(j1, j2), strict=True))
            head = pairs[:CONTEXT] if i1 > 0 else []
            tail = pairs[-CONTEXT:] if i2 < len(old_lines) else []
            middle = pairs[len(head):len(pairs) - len(tail)]
            if len(middle) <= 1:
                head, middle, tail = pairs, [], []
            shown += [line(" ", i, j) for i, j in head]
            if middle:
                parts += [Part(shown)] if shown else []
                shown = []
                parts.append(Part([line(" ", i, j) for i, j in middle],
                                  f"{len(middle):,} unchanged lines (lines {middle[0][1] + 1:,}"
                                  f"–{middle[-1][1] + 1:,}): open to read them"))
            shown += [line(" ", i, j) for i, j in tail]
            continue
        shown += [line("-", i, None) for i in range(i1, i2)]
        shown += [line("+", None, j) for j in range(j1, j2)]
    if shown:
        parts.append(Part(shown))
    added = sum(1 for p in parts for ln in p.lines if ln.sign == "+")
    removed = sum(1 for p in parts for ln in p.lines if ln.sign == "-")
    summary = f"{added:,} line{'s' if added != 1 else ''} added, {removed:,} removed"
    cut = ""
    if inline is not None:
        parts, cut = inline.trim(parts, "lines of the diff")
    block = Block("diff", title, summary, _budget(parts, "lines of the diff"),
                  note="; ".join(notes), cut=cut)
    return marker.finish(block)


def url_block(title: str, url: str, method: str, *, anchor: str, note: str = "") -> Block:
    """A request as ``httpx`` (what the HTTP tools use) parses it: the method and the URL it
    will reach with the host emphasised, then its parts — credentials, the host in ASCII,
    the port, the decoded path and each query parameter — each flagged like text."""
    try:
        import httpx
    except ImportError as exc:
        raise missing("server", "an approval card's URL") from exc
    marker = _Marker()
    verb = html.escape(plain(method.upper())) if method else ""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raw, _ = marker.html(url, "URL", 0, f"{anchor}-R0")
        block = Block("url", title, parts=[], note=f"not a valid URL ({plain(str(exc))}); "
                      "an HTTP tool will refuse it", headline=f"{verb} {raw}".strip())
        return marker.finish(block)
    rows: list[tuple[str, str]] = [("host", parsed.host)]
    if parsed.raw_host.decode("ascii", "replace") != parsed.host:
        rows.append(("host as sent (ASCII)", parsed.raw_host.decode("ascii", "replace")))
    if parsed.userinfo:
        rows.append(("credentials in the URL", parsed.userinfo.decode("utf-8", "replace")))
    if parsed.port is not None:
        rows.append(("port", str(parsed.port)))
    rows.append(("path (decoded)", parsed.path))
    rows += [(f"query: {k}", v) for k, v in parsed.params.multi_items()]
    if parsed.fragment:
        rows.append(("fragment", parsed.fragment))
    if str(parsed) != url:
        rows.append(("as sent", url))
    lines = []
    for n, (key, value) in enumerate(rows, 1):
        line = marker.line(value, where=key, anchor=f"{anchor}-R{n}")
        key_html, _ = marker.html(key, f"name of {plain(key)}", 0, line.anchor)
        lines.append(Line(line.html, key_html, "", "", line.anchor, line.flagged,
                          line.more_html, line.more_note))
    quiet = _Marker()  # the headline repeats the rows: marked, but flagged once (by the rows)
    host, _ = quiet.html(parsed.host, "host", 0, f"{anchor}-R1")
    who = html.escape(plain(parsed.userinfo.decode("ascii", "replace"))) + "@" \
        if parsed.userinfo else ""
    port = f":{parsed.port}" if parsed.port is not None else ""
    rest = parsed.raw_path.decode("ascii", "replace")
    tail = f"#{parsed.fragment}" if parsed.fragment else ""
    rest_html, _ = quiet.html(rest + tail, "path", 0, f"{anchor}-R0")
    headline = (f'{verb + " " if verb else ""}{html.escape(parsed.scheme)}://'
                f'{who}<strong class="host">{host}</strong>{port}{rest_html}')
    notes = [note] if note else []
    if parsed.scheme not in ("http", "https"):
        notes.append(f"scheme {parsed.scheme!r}: HTTP tools fetch only http and https")
    block = Block("url", title, parts=[Part(lines)], note="; ".join(notes), headline=headline)
    return marker.finish(block)
