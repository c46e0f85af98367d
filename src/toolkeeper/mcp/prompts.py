"""The earlier home of ``@prompt`` and ``Prompt``: they are ``toolkeeper.offers.prompts`` (and
``toolkeeper.prompt``, ``toolkeeper.Prompt``) now. This module goes away in 0.3.0."""

from ..offers.prompts import Prompt, PromptNotFound, Prompts, prompt

__all__ = ["Prompt", "PromptNotFound", "Prompts", "prompt"]
