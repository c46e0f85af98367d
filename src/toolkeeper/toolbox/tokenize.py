"""Tokenization for tool search: identifiers split into words, CJK into characters and bigrams."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache, lru_cache
from itertools import pairwise

import snowballstemmer

__all__ = ["tokenize"]

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_PIECES = re.compile(rf"[{_CJK}]+|[^\W\d_{_CJK}]+|[0-9]+", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_IS_CJK = re.compile(rf"[{_CJK}]")
STOPWORDS = frozenset(
    """a an and are as at be by can could do for from how i in is it me my of on or please
    should that the this to was what when where which will with would you your""".split()
)


@cache
def _stemmer() -> Callable[[str], str]:
    """The Snowball English stemmer: ``snowballstemmer`` (pure Python, in the core install),
    which runs PyStemmer's C build of the same algorithm when the ``search`` extra brings it.
    Both give the same stems, so a catalog ranks alike with or without the extra."""
    stem: Callable[[str], str] = snowballstemmer.stemmer("english").stemWord
    return stem


@lru_cache(maxsize=16384)
def _word_tokens(piece: str) -> tuple[str, ...]:
    if _IS_CJK.match(piece):
        chars = list(piece)
        return tuple(chars + [a + b for a, b in pairwise(chars)])
    if piece.isascii() and piece.isalpha() and not piece.islower():
        return tuple(part.lower() for part in _CAMEL.findall(piece))
    return (piece.lower(),)


@lru_cache(maxsize=16384)
def _stem(token: str) -> str:
    return str(_stemmer()(token)) if token.isascii() and token.isalpha() else token


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Lower-cased search tokens of ``text``.

    ``get_weather``, ``getWeather``, ``weather.get`` and ``get-weather`` all give ``get weather``;
    ``HTTPRequest`` gives ``http request``; CJK runs give their characters and character bigrams
    (``天气预报`` → ``天 气 预 报 天气 气预 预报``). English words are stemmed with Snowball
    (``calculating`` → ``calcul``) and common English stopwords dropped.
    """
    tokens: list[str] = []
    for piece in _PIECES.findall(text):
        for token in _word_tokens(piece):
            if keep_stopwords or token not in STOPWORDS:
                tokens.append(_stem(token))
    return tokens
