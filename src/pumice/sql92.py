"""RocketMQ's SQL92 message selector (4.9's filter module, from ActiveMQ's JMS selectors): the
grammar, parsed with Lark, compiled into Python closures with 4.9's evaluation rules.

Grammar (keywords in any case; ``--`` line and ``/* */`` block comments):

=====================  =====================================================================
expression             ``a OR b``, ``a AND b``, ``NOT a``, parentheses
comparison             ``=``, ``<>``, ``>``, ``>=``, ``<``, ``<=``, ``IS [NOT] NULL``,
                       ``x [NOT] BETWEEN low AND high``, ``prop [NOT] IN ('s', ...)``
operand                a property name (``[A-Za-z_$][A-Za-z0-9_$]*``), ``'string'`` (``''``
                       escapes a quote), an integer (``L`` suffix allowed: Integer if it fits,
                       else Long), a decimal (Double), ``TRUE``, ``FALSE``, ``NULL``, unary ``-``/``+``
=====================  =====================================================================

Checks when compiled, as 4.9's: ``>``-style operands that are constants must be numbers;
``= NULL`` is refused; a BETWEEN's constant bounds must be ordered; IN needs a property on its
left; the whole must be boolean (a bare property is cast: it is true only if it is a boolean
TRUE). A decimal below Double.MIN_VALUE (so ``0.0``) is refused, as 4.9 refuses it.

Evaluation, with Java's types (a message's properties are all strings): a missing property is
NULL, and a comparison with NULL is NULL (unknown), which does not match; ``AND``/``OR`` are
three-valued. Values of different types are converted as 4.9's ComparisonExpression does with
its string conversions on: a string against a number is parsed as that number's type
(Integer.valueOf, Long.valueOf, Double.valueOf, ...), and an ordering (``>``...) of two strings
compares them as doubles. A conversion that fails is an error, and an error does not match
(the broker logs it, as 4.9 does).
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Callable
from typing import Any

from lark import Lark, Transformer, v_args
from lark.exceptions import LarkError

GRAMMAR = r"""
start: or_expr

?or_expr: and_expr
        | or_expr OR and_expr -> or_

?and_expr: eq_expr
         | and_expr AND eq_expr -> and_

?eq_expr: cmp_expr
        | eq_expr "=" cmp_expr -> eq
        | eq_expr "<>" cmp_expr -> ne
        | eq_expr IS NULL -> is_null
        | eq_expr IS NOT NULL -> is_not_null

?cmp_expr: unary
         | cmp_expr ">" unary -> gt
         | cmp_expr ">=" unary -> ge
         | cmp_expr "<" unary -> lt
         | cmp_expr "<=" unary -> le
         | cmp_expr BETWEEN unary AND unary -> between
         | cmp_expr NOT BETWEEN unary AND unary -> not_between
         | cmp_expr IN "(" string_list ")" -> in_
         | cmp_expr NOT IN "(" string_list ")" -> not_in

string_list: STRING ("," STRING)*

?unary: "+" unary
      | "-" unary -> neg
      | NOT unary -> not_
      | primary

?primary: STRING -> string
        | FLOAT -> float_
        | DECIMAL -> decimal
        | TRUE -> true
        | FALSE -> false
        | NULL -> null
        | ID -> prop
        | "(" or_expr ")"

NOT.5: /not(?![A-Za-z0-9_$])/i
AND.5: /and(?![A-Za-z0-9_$])/i
OR.5: /or(?![A-Za-z0-9_$])/i
BETWEEN.5: /between(?![A-Za-z0-9_$])/i
IN.5: /in(?![A-Za-z0-9_$])/i
TRUE.5: /true(?![A-Za-z0-9_$])/i
FALSE.5: /false(?![A-Za-z0-9_$])/i
NULL.5: /null(?![A-Za-z0-9_$])/i
IS.5: /is(?![A-Za-z0-9_$])/i
FLOAT.4: /([0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)(?![A-Za-z0-9_$.])/
DECIMAL.3: /(0|[1-9][0-9]*)[lL]?(?![A-Za-z0-9_$.])/
STRING: /'(''|[^'])*'/
ID: /[A-Za-z_$][A-Za-z0-9_$]*/

LINE_COMMENT: /--[^\n\r]*(\r\n|\n|\r)/
BLOCK_COMMENT: /\/\*(.|\n)*?\*\//
%ignore /[ \t\n\r\f]+/
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
"""

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MIN_VALUE = 5e-324  # Double.MIN_VALUE: the smallest positive double


class Sql92Error(ValueError):
    """An expression that does not compile (4.9: MQFilterException "Invalid syntax")."""


class EvaluationError(Exception):
    """A value that cannot be converted or compared (4.9 throws; the message does not match)."""


class JLong(int):
    """A Java Long (a plain int is a Java Integer)."""


class JFloat(float):
    """A Java Float (a plain float is a Java Double)."""


def java_type(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "Boolean"
    if isinstance(v, JLong):
        return "Long"
    if isinstance(v, int):
        return "Integer"
    if isinstance(v, JFloat):
        return "Float"
    if isinstance(v, float):
        return "Double"
    if isinstance(v, str):
        return "String"
    return type(v).__name__


def _f32(x: float) -> float:
    try:
        return struct.unpack(">f", struct.pack(">f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?)")


def _parse_int(s: str, lo: int, hi: int, name: str) -> int:
    if not _JAVA_INT.fullmatch(s):
        raise EvaluationError(f'For input string: "{s}" ({name})')
    v = int(s)
    if not lo <= v <= hi:
        raise EvaluationError(f'For input string: "{s}" ({name} out of range)')
    return v


def _parse_double(s: str) -> float:
    t = s.strip(" \t\n\r\f\v\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f")  # Java trims chars <= ' '
    if not _JAVA_DOUBLE.fullmatch(t):
        raise EvaluationError(f'For input string: "{s}"')
    t = t.rstrip("fFdD") if not t.endswith("Infinity") and "NaN" not in t else t
    return float(t.replace("Infinity", "inf").replace("NaN", "nan"))


def _convert_string(s: str, to: str) -> Any:
    """Java's ``X.valueOf(String)`` for ``to``."""
    if to == "Boolean":
        return s.lower() == "true"
    if to == "Integer":
        return _parse_int(s, INT_MIN, INT_MAX, "Integer")
    if to == "Long":
        return JLong(_parse_int(s, LONG_MIN, LONG_MAX, "Long"))
    if to == "Float":
        return JFloat(_f32(_parse_double(s)))
    if to == "Double":
        return _parse_double(s)
    raise EvaluationError(f"cannot convert a string to {to}")


def _compare_same(lv: Any, rv: Any, kind: str) -> int:
    if kind == "String":
        a, b = lv.encode("utf-16-be"), rv.encode("utf-16-be")  # Java compares UTF-16 code units
        return (a > b) - (a < b)
    if kind in ("Double", "Float"):  # Double.compare: NaN above all, -0.0 below 0.0
        if math.isnan(lv) or math.isnan(rv):
            return (math.isnan(lv) and not math.isnan(rv)) - (math.isnan(rv) and not math.isnan(lv))
        if lv == rv == 0.0:
            return (math.copysign(1, lv) > 0) - (math.copysign(1, rv) > 0)
    return (lv > rv) - (lv < rv)


_NUMBER_RANK = {"Integer": 0, "Long": 1, "Float": 2, "Double": 3}


def _widen(v: Any, to: str) -> Any:
    """A Java number as the wider type ``to`` (Long, Float or Double)."""
    if to == "Long":
        return JLong(v)
    if to == "Float":
        return JFloat(_f32(float(v)))
    return float(v)


def java_compare(lv: Any, rv: Any) -> int:
    """ComparisonExpression.__compare with convertStringExpressions on (as SelectorParser sets):
    two numbers of different types meet at the wider one; a string meets the other side's type
    (X.valueOf); anything else compares as -1. 4.9's two ClassCastExceptions (a Boolean against a
    String, a Double against a Float) are errors."""
    lc, rc = java_type(lv), java_type(rv)
    if lc != rc:
        if lc in _NUMBER_RANK and rc in _NUMBER_RANK:
            if lc == "Double" and rc == "Float":
                raise EvaluationError(f"cannot compare a Double with a Float ({lv!r}, {rv!r})")
            wider = lc if _NUMBER_RANK[lc] > _NUMBER_RANK[rc] else rc
            lv, rv = _widen(lv, wider) if lc != wider else lv, _widen(rv, wider) if rc != wider else rv
        elif lc in _NUMBER_RANK and rc == "String":
            rv = _convert_string(rv, lc)  # type: ignore[arg-type]
        elif lc == "String" and (rc in _NUMBER_RANK or rc == "Boolean"):
            lv = _convert_string(lv, rc)  # type: ignore[arg-type]
        elif lc == "Boolean" and rc == "String":
            raise EvaluationError(f"cannot compare a Boolean with a String ({lv!r}, {rv!r})")
        else:
            return -1
    kind = java_type(lv)
    if kind != java_type(rv):
        raise EvaluationError(f"cannot compare {lv!r} with {rv!r}")
    return _compare_same(lv, rv, kind)  # type: ignore[arg-type]


def java_equals(lv: Any, rv: Any) -> bool:
    """Object.equals: the same Java type and value (Double.equals compares bits)."""
    kind = java_type(lv)
    if kind != java_type(rv):
        return False
    if kind in ("Double", "Float"):
        return struct.pack(">d", lv) == struct.pack(">d", rv)
    return bool(lv == rv)


# -- compiled expressions ---------------------------------------------------------------------

Props = dict[str, str]
Evaluator = Callable[[Props], Any]


class _Node:
    """An expression while it is compiled: its evaluator and what 4.9's checks need."""

    __slots__ = ("constant", "evaluate", "is_bool", "is_property", "value")

    def __init__(
        self, evaluate: Evaluator, *, is_bool: bool = False, constant: bool = False, value: Any = None,
        is_property: bool = False,
    ) -> None:  # fmt: skip
        self.evaluate = evaluate
        self.is_bool = is_bool  # a BooleanExpression (or a TRUE/FALSE/NULL constant)
        self.constant = constant
        self.value = value
        self.is_property = is_property


def _java_str(v: Any) -> str:
    """A constant as 4.9's ConstantExpression prints it."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    return str(v)


def _constant(value: Any, is_bool: bool = False) -> _Node:
    return _Node(lambda _p: value, constant=True, value=value, is_bool=is_bool)


def _as_bool(node: _Node) -> _Node:
    if node.is_bool:
        return node
    if node.is_property:  # BooleanCast: only a Boolean value is true
        ev = node.evaluate

        def cast(p: Props) -> Any:
            v = ev(p)
            if v is None:
                return None
            return v if isinstance(v, bool) else False

        return _Node(cast, is_bool=True)
    raise Sql92Error("Expression will not result in a boolean value")


def _check_less_than_operand(node: _Node) -> None:
    if node.constant:
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return
        raise Sql92Error(f"Value '{_java_str(node.value)}' cannot be compared.")
    if node.is_bool:
        raise Sql92Error("a boolean expression cannot be compared.")


def _ordering(left: _Node, right: _Node, test: Callable[[int], bool]) -> _Node:
    _check_less_than_operand(left)
    _check_less_than_operand(right)
    le, re_ = left.evaluate, right.evaluate

    def evaluate(p: Props) -> Any:
        lv = le(p)
        if lv is None:
            return None
        rv = re_(p)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):  # 4.9: two strings are compared as doubles
            try:
                return test(java_compare(_parse_double(lv), _parse_double(rv)))
            except EvaluationError as e:
                raise EvaluationError(
                    f"It's illegal to compare string by '>=', '>', '<', '<='. lv={lv}, rv={rv}"
                ) from e
        return test(java_compare(lv, rv))

    return _Node(evaluate, is_bool=True)


def _do_equal(left: _Node, right: _Node) -> _Node:
    le, re_ = left.evaluate, right.evaluate

    def evaluate(p: Props) -> Any:
        lv, rv = le(p), re_(p)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or java_equals(lv, rv):
            return True
        return java_compare(lv, rv) == 0

    return _Node(evaluate, is_bool=True)


def _equal(left: _Node, right: _Node) -> _Node:
    for node in (left, right):
        if node.constant and node.value is None:
            raise Sql92Error("'NULL' cannot be compared.")
    if left.constant and right.constant and left.is_bool and not right.is_bool:
        raise Sql92Error(f"'{_java_str(left.value)}' cannot be compared with '{_java_str(right.value)}'")
    return _do_equal(left, right)


def _not(node: _Node) -> _Node:
    ev = _as_bool(node).evaluate

    def evaluate(p: Props) -> Any:
        v = ev(p)
        return None if v is None else not v

    return _Node(evaluate, is_bool=True)


def _logic(left: _Node, right: _Node, decisive: bool) -> _Node:
    """AND (``decisive`` False) and OR (True), three-valued: a decisive side decides; else an
    unknown side makes the whole unknown."""
    le, re_ = _as_bool(left).evaluate, _as_bool(right).evaluate

    def evaluate(p: Props) -> Any:
        lv = le(p)
        if lv is decisive:
            return decisive
        rv = re_(p)
        if rv is decisive:
            return decisive
        return None if lv is None or rv is None else not decisive

    return _Node(evaluate, is_bool=True)


def _and(left: _Node, right: _Node) -> _Node:
    return _logic(left, right, False)


def _or(left: _Node, right: _Node) -> _Node:
    return _logic(left, right, True)


def _string_literal(token: str) -> str:
    return token[1:-1].replace("''", "'")


def _ordering_rule(test: Callable[[int], bool]) -> Callable[[Any, _Node, _Node], _Node]:
    def rule(self: Any, left: _Node, right: _Node) -> _Node:
        return _ordering(left, right, test)

    return rule


@v_args(inline=True)
class _Compiler(Transformer):  # type: ignore[type-arg]
    def start(self, node: _Node) -> _Node:
        return _as_bool(node)

    def or_(self, left: _Node, _op: Any, right: _Node) -> _Node:
        return _or(left, right)

    def and_(self, left: _Node, _op: Any, right: _Node) -> _Node:
        return _and(left, right)

    def eq(self, left: _Node, right: _Node) -> _Node:
        return _equal(left, right)

    def ne(self, left: _Node, right: _Node) -> _Node:
        return _not(_equal(left, right))

    def is_null(self, left: _Node, _is: Any, _null: Any) -> _Node:
        return _do_equal(left, _constant(None, is_bool=True))

    def is_not_null(self, left: _Node, _is: Any, _not_: Any, _null: Any) -> _Node:
        return _not(_do_equal(left, _constant(None, is_bool=True)))

    gt = _ordering_rule(lambda c: c > 0)
    ge = _ordering_rule(lambda c: c >= 0)
    lt = _ordering_rule(lambda c: c < 0)
    le = _ordering_rule(lambda c: c <= 0)

    def between(self, value: _Node, _b: Any, low: _Node, _a: Any, high: _Node) -> _Node:
        if low.constant and high.constant:
            if low.value is None or high.value is None:
                raise Sql92Error("Illegal values of between, values can not be null!")
            try:
                ordered = java_compare(high.value, low.value) >= 0
            except EvaluationError as e:
                raise Sql92Error(str(e)) from None
            if not ordered:
                raise Sql92Error(
                    f"Illegal values of between, left value({low.value}) must less than or equal to right "
                    f"value({high.value})"
                )
        return _and(_ordering(value, low, lambda c: c >= 0), _ordering(value, high, lambda c: c <= 0))

    def not_between(self, value: _Node, _n: Any, _b: Any, low: _Node, _a: Any, high: _Node) -> _Node:
        return _or(_ordering(value, low, lambda c: c < 0), _ordering(value, high, lambda c: c > 0))

    def string_list(self, *tokens: Any) -> frozenset[str]:
        return frozenset(_string_literal(str(t)) for t in tokens)

    def _in(self, left: _Node, values: frozenset[str], negate: bool) -> _Node:
        if not left.is_property:
            raise Sql92Error("Expected a property for In expression")
        ev = left.evaluate

        def evaluate(p: Props) -> Any:
            v = ev(p)
            if v is None or not isinstance(v, str):
                return None
            return (v in values) != negate

        return _Node(evaluate, is_bool=True)

    def in_(self, left: _Node, _in: Any, values: frozenset[str]) -> _Node:
        return self._in(left, values, False)

    def not_in(self, left: _Node, _n: Any, _in: Any, values: frozenset[str]) -> _Node:
        return self._in(left, values, True)

    def neg(self, node: _Node) -> _Node:
        if node.constant and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            v = node.value
            return _constant(type(v)(-v) if isinstance(v, (JLong, JFloat)) else -v)
        ev = node.evaluate

        def evaluate(p: Props) -> Any:
            v = ev(p)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return type(v)(-v) if isinstance(v, (JLong, JFloat)) else -v
            return None

        return _Node(evaluate)

    def not_(self, _n: Any, node: _Node) -> _Node:
        return _not(node)

    def string(self, token: Any) -> _Node:
        return _constant(_string_literal(str(token)))

    def decimal(self, token: Any) -> _Node:
        v = int(str(token).rstrip("lL"))
        if v > LONG_MAX:
            raise Sql92Error(f"{token} is out of the range of a long")
        return _constant(v if INT_MIN <= v <= INT_MAX else JLong(v))

    def float_(self, token: Any) -> _Node:
        v = float(str(token))
        if v < DOUBLE_MIN_VALUE:
            raise Sql92Error(f"{token} is less than {DOUBLE_MIN_VALUE}")
        if math.isinf(v):
            raise Sql92Error(f"{token} is greater than the largest double")
        return _constant(v)

    def true(self, _t: Any) -> _Node:
        return _constant(True, is_bool=True)

    def false(self, _t: Any) -> _Node:
        return _constant(False, is_bool=True)

    def null(self, _t: Any) -> _Node:
        return _constant(None, is_bool=True)

    def prop(self, token: Any) -> _Node:
        name = str(token)
        return _Node(lambda p: p.get(name), is_property=True)


@functools.cache
def _parser() -> Lark:
    return Lark(GRAMMAR, parser="lalr", lexer="contextual", maybe_placeholders=False)


class Sql92Filter:
    """A compiled selector: ``evaluate(properties)`` gives True, False, None (unknown) or
    raises EvaluationError; ``matches`` is True only for True (errors and unknowns do not)."""

    def __init__(self, expression: str, evaluate: Evaluator) -> None:
        self.expression = expression
        self.evaluate = evaluate

    def matches(self, properties: Props) -> bool:
        try:
            return self.evaluate(properties) is True
        except (EvaluationError, TypeError, ValueError, OverflowError):
            return False

    def __repr__(self) -> str:
        return f"Sql92Filter({self.expression!r})"


@functools.lru_cache(maxsize=1024)
def compile_sql92(expression: str) -> Sql92Filter:
    """Sql92Error (naming the expression) when it is not a valid selector."""
    try:
        tree = _parser().parse(expression)
        node = _Compiler().transform(tree)
    except Sql92Error as e:
        raise Sql92Error(f"Invalid syntax: {expression} ({e})") from None
    except LarkError as e:
        cause = e.orig_exc if hasattr(e, "orig_exc") else e
        if isinstance(cause, Sql92Error):
            raise Sql92Error(f"Invalid syntax: {expression} ({cause})") from None
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise Sql92Error(f"Invalid syntax: {expression} ({first})") from None
    return Sql92Filter(expression, node.evaluate)
