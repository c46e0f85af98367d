"""Which locale tool descriptions are shown in: the config's ``locale``, then
``TOOLKEEPER_LOCALE``, ``LANG`` and ``LC_ALL``."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["locale_chain", "normalize_locale", "resolve_locale"]

_IGNORED = {"", "c", "posix"}


def normalize_locale(value: str | None) -> str | None:
    """``zh_CN.UTF-8`` → ``zh-CN``, ``en_US`` → ``en-US``, ``fr`` → ``fr``; ``C``/``POSIX`` → None."""
    if value is None:
        return None
    base = value.split(".", 1)[0].split("@", 1)[0].strip().replace("_", "-")
    if base.lower() in _IGNORED:
        return None
    language, _, region = base.partition("-")
    return f"{language.lower()}-{region.upper()}" if region else language.lower()


def resolve_locale(configured: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The active locale: the config's ``locale``, else ``TOOLKEEPER_LOCALE``, ``LANG``,
    ``LC_ALL`` (first usable one), else ``en``."""
    env = os.environ if env is None else env
    for candidate in (configured, env.get("TOOLKEEPER_LOCALE"), env.get("LANG"), env.get("LC_ALL")):
        locale = normalize_locale(candidate)
        if locale:
            return locale
    return "en"


def locale_chain(locale: str) -> list[str]:
    """Locales to try in order: ``zh-CN`` → ``zh-CN``, ``zh``, ``en``."""
    chain = [locale]
    language = locale.split("-", 1)[0]
    if language != locale:
        chain.append(language)
    if "en" not in chain:
        chain.append("en")
    return chain
