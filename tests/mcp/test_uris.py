"""A relayed resource's URI in its normal form: the spellings of one resource meet in one URI,
and normalizing twice changes nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper.mcp.uris import normal_uri

PREFIX = "toolkeeper://mcp/"


@pytest.mark.parametrize(("spelled", "normal"), [
    ("up/file:///logs/./sunday", "up/file:///logs/sunday"),
    ("up/file:////logs//sunday", "up/file:///logs/sunday"),
    ("up/FILE:///logs/sunday", "up/file:///logs/sunday"),
    ("up/file:///logs/%73unday", "up/file:///logs/sunday"),
    ("up/file:///logs%2fsunday", "up/file:///logs/sunday"),
    ("up/file:///logs/x/../../../etc/passwd", "up/file:///etc/passwd"),
    ("up/https://Ex.COM/a/%2f/./b?q=%7e", "up/https://ex.com/a/%2F/b?q=~"),
    ("up/https://User@Ex.COM/a", "up/https://User@Ex.COM/a"),  # a user's case may matter
    ("up/notes:secret", "up/notes:secret"),
    ("up/file:///a/b/", "up/file:///a/b/"),
    ("up/not a uri", "up/not a uri"),
])
def test_the_spellings_of_one_resource_meet_in_one_uri(spelled: str, normal: str) -> None:
    assert normal_uri(PREFIX + spelled, PREFIX) == PREFIX + normal
    assert normal_uri("notes://x/./y", PREFIX) == "notes://x/./y"  # not relayed: as it is


PATHS = st.lists(st.sampled_from(["a", "b", ".", "..", "", "%2e", "%2F", "%41", "x~", "%7e"]),
                 max_size=8).map("/".join)


@settings(max_examples=400, deadline=None)
@given(scheme=st.sampled_from(["file", "FILE", "https", "notes"]), path=PATHS,
       host=st.sampled_from(["", "Ex.com", "h"]))
def test_normalizing_twice_changes_nothing_and_leaves_no_dot_segment(scheme: str, path: str,
                                                                     host: str) -> None:
    uri = f"{PREFIX}up/{scheme}://{host}/{path}"
    once = normal_uri(uri, PREFIX)
    assert normal_uri(once, PREFIX) == once
    inner = once[len(PREFIX) + 3:]
    segments = inner.split("://", 1)[1].split("/")[1:]
    assert "." not in segments and ".." not in segments, once
