"""The shapes gateways keep prices in: LiteLLM's ``/model/info`` and the cost its replies
state (``x-litellm-response-cost``)."""

from __future__ import annotations

import pytest

from overbrainer.providers.prices import Price, parse_model_info, stated_cost


def deployment(name, info):
    return {"model_name": name, "litellm_params": {"model": f"openai/{name}"},
            "model_info": info}


def test_model_info_prices_each_model_name_per_token():
    prices = parse_model_info({"data": [
        deployment("a", {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}),
        deployment("free", {"input_cost_per_token": 0, "output_cost_per_token": 0.0}),
        deployment("unset", {"input_cost_per_token": None, "output_cost_per_token": None}),
        deployment("half", {"input_cost_per_token": 1e-6}),
        deployment("negative", {"input_cost_per_token": -1, "output_cost_per_token": 1e-6}),
        deployment("nan", {"input_cost_per_token": float("nan"), "output_cost_per_token": 0}),
        deployment("bool", {"input_cost_per_token": True, "output_cost_per_token": True}),
        deployment("text", {"input_cost_per_token": "1e-6", "output_cost_per_token": "1e-6"}),
        {"model_name": "no-info"},
        {"model_info": {"input_cost_per_token": 1, "output_cost_per_token": 1}},
        "not a deployment",
    ]})
    assert prices == {"a": Price(1e-6, 2e-6), "free": Price(0.0, 0.0)}


def test_a_model_name_served_by_several_deployments_takes_the_dearest():
    prices = parse_model_info({"data": [
        deployment("m", {"input_cost_per_token": 1e-6, "output_cost_per_token": 8e-6}),
        deployment("m", {"input_cost_per_token": 3e-6, "output_cost_per_token": 2e-6}),
    ]})
    assert prices == {"m": Price(3e-6, 8e-6)}


def test_model_info_that_is_not_a_listing_prices_nothing():
    for data in (None, [], {"data": None}, {"data": {"m": 1}}, "text"):
        assert parse_model_info(data) == {}


def test_a_reply_s_stated_cost_is_read_when_it_is_a_finite_non_negative_number():
    said = stated_cost({"x-litellm-response-cost": "0.00010999999999999999"})
    assert said == pytest.approx(0.00011)
    assert stated_cost({"x-litellm-response-cost": "0.0"}) == 0.0
    assert stated_cost({"x-litellm-response-cost": " 3e-05 "}) == 3e-05
    for value in ("nan", "inf", "-1", "", "cheap", "1_000", "0x10", "1e999"):
        assert stated_cost({"x-litellm-response-cost": value}) is None, value
    assert stated_cost({"x-litellm-response-cost-original": "1.0"}) is None
