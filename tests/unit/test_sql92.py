"""pumice.sql92 against RocketMQ 4.9.8's own filter tests (ExpressionTest, ParserTest): every
evaluation and parse they make, as tests/data/rocketmq-4.9.8-sql92-cases.json lists them (each
checked against 4.9.8's filter classes with Java 17 when the file was made)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pumice.sql92 import EvaluationError, JFloat, JLong, Sql92Error, compile_sql92

CASES = json.loads((Path(__file__).parents[1] / "data" / "rocketmq-4.9.8-sql92-cases.json").read_text())


def java_value(v: dict[str, Any]) -> Any:
    kind, value = v["type"], v["value"]
    return {"String": str, "Integer": int, "Long": JLong, "Double": float, "Float": JFloat, "Boolean": bool}[kind](
        value
    )


def evaluate_cases() -> list[Any]:
    out = []
    for i, case in enumerate(CASES["evaluate"]):
        built_in_java = "NowExpression" in case.get("note", "")  # no SQL text: built in code
        marks = [pytest.mark.skip(reason="built with NowExpression in Java, not parsed")] if built_in_java else []
        out.append(pytest.param(case, id=f"{i}-{case['test']}", marks=marks))
    return out


@pytest.mark.parametrize("case", evaluate_cases())
def test_evaluations_match_rocketmq(case: dict[str, Any]) -> None:
    expr = compile_sql92(case["expression"])
    context = {name: java_value(v) for name, v in case["context"]}
    if case["expect"] == "error":
        with pytest.raises(EvaluationError):
            expr.evaluate(context)
        assert expr.matches(context) is False  # the broker: an error does not match
    else:
        result = expr.evaluate(context)
        # 4.9's test helper takes a null (unknown) result as false
        assert (result is True) is case["expect"], (case["expression"], context, result)


@pytest.mark.parametrize("case", CASES["parse"], ids=lambda c: c["test"])
def test_parses_match_rocketmq(case: dict[str, Any]) -> None:
    if case["expect"] == "ok":
        compile_sql92(case["expression"])
    else:
        with pytest.raises(Sql92Error, match="Invalid syntax"):
            compile_sql92(case["expression"])


@pytest.mark.parametrize(
    ("expression", "properties", "matches"),
    [
        # what a broker sees: every property a string
        ("a > 5", {"a": "6"}, True),
        ("a > 5", {"a": "5"}, False),
        ("a > 5", {"a": "x"}, False),  # Integer.valueOf("x") fails: no match
        ("a > 5", {}, False),  # unknown
        ("NOT (a > 5)", {}, False),  # NOT unknown is unknown
        ("a > 5 OR b = 'y'", {"b": "y"}, True),
        ("a = 5.0", {"a": "5"}, True),  # Double.valueOf("5")
        ("a = 5", {"a": "5.0"}, False),  # Integer.valueOf("5.0") fails
        ("TAGS IN ('A', 'B') AND price BETWEEN 10 AND 20", {"TAGS": "B", "price": "10"}, True),
        ("TAGS IN ('A', 'B') AND price BETWEEN 10 AND 20", {"TAGS": "C", "price": "10"}, False),
        ("ok", {"ok": "true"}, False),  # a bare property is true only for a Boolean value
        ("ok = TRUE", {"ok": "true"}, True),
        ("region IS NULL OR region <> 'eu'", {"region": "us"}, True),
        ("big > 3000000000", {"big": "3000000001"}, True),  # a Long literal: Long.valueOf
        ("x = 'it''s'", {"x": "it's"}, True),
        ("a /* block */ = 'v' -- tail\n", {"a": "v"}, True),
    ],
)
def test_broker_string_properties(expression: str, properties: dict[str, str], matches: bool) -> None:
    assert compile_sql92(expression).matches(properties) is matches


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "a = NULL",
        "a > 'abc'",
        "3",
        "'s'",
        "a IN (1)",
        "5 IN ('5')",
        "a BETWEEN 10 AND 2",
        "a.b = 1",
        "a =",
        "a > 0.0",
    ],
)
def test_invalid_expressions_are_refused_with_their_text(expression: str) -> None:
    with pytest.raises(Sql92Error, match="Invalid syntax"):
        compile_sql92(expression)
