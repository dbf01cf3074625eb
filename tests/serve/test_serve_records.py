"""A serve's record: its handle's price (a machine made for the serve, as a Runpod pod)
kept through the record, and a record whose handle is not valid refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overbrainer.errors import UserError
from overbrainer.job.serving import ServeHandle
from overbrainer.serve.records import ServeRecord, ServeRecords


def record(handle: ServeHandle) -> ServeRecord:
    return ServeRecord(
        provider="big", target="gpu", engine="vllm", model="m", started=1.0, owner=2,
        kept=False, handle=handle, price_per_hour=0.44,
    )  # fmt: skip


def test_a_handle_s_price_is_kept_by_the_record(tmp_path: Path) -> None:
    records = ServeRecords(tmp_path)
    priced = ServeHandle("big-1", "/w/.serve/big-1", 4242, 8000, price_per_hour=0.44)
    records.save(record(priced))
    assert records.load("big") == record(priced)
    unpriced = ServeHandle("big-2", "/w/.serve/big-2", 4243, 8001)
    records.save(record(unpriced))
    assert records.load("big") == record(unpriced)
    assert "price_per_hour" not in json.loads(records.path("big").read_text())["handle"]


@pytest.mark.parametrize("price", [-1, "cheap", float("inf")])
def test_a_handle_with_a_price_that_is_not_one_is_refused(tmp_path: Path, price: object) -> None:
    records = ServeRecords(tmp_path)
    records.save(record(ServeHandle("big-1", "/w/.serve/big-1", 4242, 8000)))
    data = json.loads(records.path("big").read_text())
    data["handle"]["price_per_hour"] = price
    records.path("big").write_text(json.dumps(data))
    with pytest.raises(UserError) as caught:
        records.load("big")
    assert str(caught.value).startswith(".overbrainer/serve/big.json is not a valid serve record")
    assert "remove it" in str(caught.value)
