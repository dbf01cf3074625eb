"""Each protocol the client speaks offers what ``WireFormat`` says (mypy checks the types;
this checks that nothing named is missing from a module)."""

from __future__ import annotations

import pytest

from overbrainer.providers.client import PROTOCOLS
from overbrainer.providers.wire import WireFormat


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_each_protocol_module_is_a_wire_format(protocol: str) -> None:
    assert isinstance(PROTOCOLS[protocol], WireFormat)


def test_a_module_without_a_chat_path_is_no_wire_format() -> None:
    import types

    lacking = types.ModuleType("lacking")
    assert not isinstance(lacking, WireFormat)
