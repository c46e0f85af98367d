"""The earlier home of ``@resource`` and ``Resource``: they are ``toolkeeper.offers.resources``
(and ``toolkeeper.resource``, ``toolkeeper.Resource``) now. This module goes away in 0.3.0."""

from ..offers.resources import (
    ARTIFACT_PREFIX,
    Completions,
    Resource,
    ResourceNotFound,
    Resources,
    artifact_link,
    complete_from,
    resource,
)

__all__ = ["ARTIFACT_PREFIX", "Completions", "Resource", "ResourceNotFound", "Resources",
           "artifact_link", "complete_from", "resource"]
