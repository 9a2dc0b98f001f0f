"""Parse .rx text into an IR :class:`~relaxc.ir.nodes.Module`.

The grammar (``rx.lark``) is LALR(1) and is compiled by lark; parsing runs lark's own parse
table (states, shift/reduce actions, gotos) with a small driver loop here, fed by the
single-regex lexer of :mod:`.lexer`. The loop does what lark's LALR parser does, minus the
per-token Token objects and the generic callback wrappers: each grammar rule is turned, once,
into a small function that shapes the rule's children exactly as lark's tree builder would
(punctuation dropped, ``None`` for an absent ``[optional]``, ``?rule`` with one child passed
through, ``*``/``+`` repetitions spliced into the parent) and calls the :class:`_Builder`
method named after the rule or its alias. So the builder runs as the parser reduces, and no
parse tree is built.

Every node gets a :class:`Loc` from the token that starts it. Syntax errors become
:class:`RxError` with the location of the offending token and a message that says what was
expected, in words.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import re
import types
from bisect import bisect_left
from importlib import resources
from typing import Any, Callable, Iterator

from lark import Lark

from relaxc.ir import dims as D

from .lexer import BAD_CHAR, KEYWORD_OR_NAME, SKIP, LexError, RxLexer, line_col
from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.nodes import (
    direct_constructor,
    Bind,
    Call,
    CallFunc,
    DictLit,
    DType,
    Effect,
    Function,
    Invoke,
    ListLit,
    Module,
    Param,
    Project,
    TupleExpr,
    Var,
)
from relaxc.ir.types import OBJECT, STORAGE, TensorType, TupleType, canonical_dtype

_FLOAT_NAMES = {"inf": float("inf"), "nan": float("nan")}
_NEWLINE = re.compile("\n")


def _int_fold(op: str, a: D.Dim, b: D.Dim) -> D.Dim:
    """Fold ``a op b`` when both are integers; keep the user's expression otherwise."""
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
        if op in ("/", "%") and b == 0:
            return D.BinOp(op, a, b)
        return D._apply(op, a, b)
    return D.BinOp(op, a, b)


_DIM_TYPES = (int, D.Sym, D.BinOp, D.DimCall)
"""What a dimension expression is made of (``name`` may also give a DType or inf/nan)."""

_direct_constructor = direct_constructor


_NODES = (Loc, Var, Call, CallFunc, Invoke, TupleExpr, Project, Bind, Effect, Param, Function)
(
    _new_Loc, _new_Var, _new_Call, _new_CallFunc, _new_Invoke, _new_TupleExpr, _new_Project, _new_Bind,
    _new_Effect, _new_Param, _new_Function,
) = map(_direct_constructor, _NODES)
_new_TensorType, _new_TupleType, _new_Sym = map(_direct_constructor, (TensorType, TupleType, D.Sym))


class _Builder:
    """Builds IR nodes as the parser reduces; one per parse (it knows the file and its text).

    A method gets the children of its rule as lark would pass them to a Transformer: anonymous
    punctuation filtered out, ``None`` for an absent ``[optional]`` part. A terminal arrives as
    the lexer's ``re.Match`` (``m[0]`` is its text), not as a lark Token.
    """

    def __init__(self, filename: str, text: str):
        self._file = filename
        self._text = text
        self._newlines: list[int] | None = None
        self._line = 1  # the line of the last location made (the next one is likely on it)
        self._last_non_dim: tuple[Any, re.Match] | None = None  # the latest dtype or number name()

    def _loc(self, m: re.Match) -> Loc:
        pos = m.start()
        newlines = self._newlines
        if newlines is None:  # offsets of every "\n", between -1 and a stop after the end
            text = self._text
            newlines = self._newlines = [-1, *(n.start() for n in _NEWLINE.finditer(text)), len(text) + 1]
        line = self._line  # line n is newlines[n - 1] < pos <= newlines[n]
        if not newlines[line - 1] < pos <= newlines[line]:
            line = self._line = bisect_left(newlines, pos)
        return _new_Loc(self._file, line, pos - newlines[line - 1], m.end() - pos)  # no terminal is empty

    # -- module structure -------------------------------------------------------------
    def start(self, children: list) -> Module:
        return Module(tuple(children))

    def function(self, c: list) -> Function:
        name_tok: re.Match = c[1]
        i = 2
        params: list[Param] = []
        while isinstance(c[i], Param) or c[i] is None:
            if c[i] is not None:
                params.append(c[i])
            i += 1
            if i >= len(c):
                break
        ret_type = c[i]
        i += 1
        attrs: tuple = ()
        attr_locs: tuple = ()
        if c[i] is None:  # no attrs: placeholders for ATTRS and dict
            i += 2
        else:
            attrs = c[i + 1].items
            attr_locs = c[i + 1].locs
            i += 2
        body = tuple(c[i:-1])
        ret = c[-1]
        return _new_Function(name_tok[0][1:], tuple(params), ret_type, attrs, body, ret, self._loc(name_tok),
                             attr_locs)

    def param(self, c: list) -> Param:
        return _new_Param(c[0][0][1:], c[1], self._loc(c[0]))

    def bind(self, c: list) -> Bind:
        return _new_Bind(c[0][0][1:], c[1], c[2], self._loc(c[0]))

    def effect(self, c: list) -> Effect:
        return _new_Effect(c[0], c[0].loc)

    def ret(self, c: list):
        return c[1]

    # -- expressions ------------------------------------------------------------------
    def var(self, c: list) -> Var:
        m = c[0]
        return _new_Var(m[0][1:], self._loc(m))

    def args(self, c: list) -> tuple[tuple, tuple]:
        pos: list = []
        kw: list = []
        last_kw: "_KwArg | None" = None
        for a in c:
            if a is None:
                continue
            if isinstance(a, _KwArg):
                if any(k == a.key for k, _ in kw):
                    raise RxError(f"keyword argument '{a.key}' given twice", a.loc)
                kw.append((a.key, a.value))
                last_kw = a
            else:
                if kw:
                    loc = a.loc if isinstance(a, Var) else last_kw.loc if last_kw is not None else None
                    what = f"%{a.name}" if isinstance(a, Var) else "a value"
                    raise RxError(f"positional argument after a keyword argument ({what} after "
                                  f"'{last_kw.key if last_kw else '?'}=')", loc)
                pos.append(a)
        return tuple(pos), tuple(kw)

    def opcall(self, c: list) -> Call:
        pos, kw = c[1]
        return _new_Call(c[0][0], pos, kw, self._loc(c[0]))

    def funccall(self, c: list) -> CallFunc:
        return _new_CallFunc(c[1][0][1:], tuple(v for v in c[2:] if v is not None), self._loc(c[1]))

    def invoke(self, c: list) -> Invoke:
        target: re.Match = c[1]
        is_func = target.lastgroup == "GLOBAL"
        pos, kw = c[2]
        outs = tuple(v for v in c[4:] if v is not None)
        name = target[0][1:] if is_func else target[0]
        return _new_Invoke(name, is_func, pos, kw, outs, self._loc(c[0]))

    def tuple_expr(self, c: list) -> TupleExpr:
        fields = tuple(v for v in c if v is not None)
        return _new_TupleExpr(fields, fields[0].loc if fields else None)

    def project(self, c: list) -> Project:
        return _new_Project(c[0], int(c[1][0]), c[0].loc)

    def kwarg(self, c: list) -> "_KwArg":
        return _KwArg(c[0][0], c[1], self._loc(c[0]))

    # -- values -----------------------------------------------------------------------
    def int(self, c: list) -> int:
        try:
            return int(c[0][0])
        except ValueError:  # longer than Python converts (4300 digits)
            raise RxError(f"integer literal of {len(c[0][0])} digits is too long", self._loc(c[0])) from None

    def name(self, c: list) -> Any:
        text = c[0][0]
        dtype = canonical_dtype(text)
        if dtype is not None:
            v: Any = DType(dtype)
            self._last_non_dim = (v, c[0])
            return v
        if text in _FLOAT_NAMES:
            v = _FLOAT_NAMES[text]
            self._last_non_dim = (v, c[0])
            return v
        if "." in text:
            raise RxError(f"'{text}' is not a valid value (a symbolic dim has no dots)", self._loc(c[0]))
        return _new_Sym(text)

    def dimcall(self, c: list) -> D.Dim:
        func = c[0][0]
        if func not in D.DIM_FUNCS:
            raise RxError(
                f"'{func}(...)' is not allowed in a dimension expression (only max and min)",
                self._loc(c[0]),
            )
        for a in reversed(c[1:]):
            if not isinstance(a, _DIM_TYPES):
                self._not_a_dim(a)
        return D.DimCall(func, tuple(c[1:]))

    def _not_a_dim(self, v: Any) -> None:
        """Refuse a dtype or a number (``inf``, ``nan``) inside a dimension expression.

        Such an operand is always the latest one :meth:`name` made (each arithmetic rule
        checks its operands as soon as it is reduced, the right one first), so
        ``_last_non_dim`` holds its token."""
        last = self._last_non_dim
        loc = self._loc(last[1]) if last is not None and last[0] is v else None
        what = f"'{v.name}' is a dtype" if isinstance(v, DType) else f"'{v}' is a number"
        raise RxError(f"{what}, not a dimension (dimension expressions combine integers and symbolic "
                      "names with + - * / % and max/min)", loc)

    def _arith(self, op: str, c: list) -> D.Dim:
        a, b = c[0], c[1]
        if not isinstance(b, _DIM_TYPES):
            self._not_a_dim(b)
        if not isinstance(a, _DIM_TYPES):
            self._not_a_dim(a)
        return _int_fold(op, a, b)

    def add(self, c: list) -> D.Dim:
        return self._arith("+", c)

    def sub(self, c: list) -> D.Dim:
        return self._arith("-", c)

    def mul(self, c: list) -> D.Dim:
        return self._arith("*", c)

    def div(self, c: list) -> D.Dim:
        return self._arith("/", c)

    def mod(self, c: list) -> D.Dim:
        return self._arith("%", c)

    def neg(self, c: list) -> Any:
        v = c[0]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            r = -v
            if self._last_non_dim is not None and self._last_non_dim[0] is v:  # -inf: still a number
                self._last_non_dim = (r, self._last_non_dim[1])
            return r
        if not isinstance(v, _DIM_TYPES):
            self._not_a_dim(v)
        return D.BinOp("-", 0, v)

    def float(self, c: list) -> float:
        return float(c[0][0])

    def neg_float(self, c: list) -> float:
        return -float(c[0][0])

    def string(self, c: list) -> str:
        try:
            return json.loads(c[0][0])
        except ValueError:
            raise RxError("invalid escape in string literal", self._loc(c[0])) from None

    def true(self, c: list) -> bool:
        return True

    def false(self, c: list) -> bool:
        return False

    def empty_tuple(self, c: list) -> tuple:
        return ()

    def tuple_value(self, c: list) -> tuple:
        return tuple(v for v in c if v is not None)

    def list_value(self, c: list) -> ListLit:
        return ListLit(tuple(v for v in c if v is not None))

    def dict(self, c: list) -> DictLit:
        items = [v for v in c if v is not None]
        seen: set[str] = set()
        for key, _val, loc in items:
            if key in seen:
                raise RxError(f"key '{key}' given twice", loc)
            seen.add(key)
        return DictLit(tuple((k, v) for k, v, _ in items), tuple(loc for _, _, loc in items))

    def dict_item(self, c: list) -> tuple:
        return (c[0][0], c[1], self._loc(c[0]))

    # -- types ------------------------------------------------------------------------
    def tensor_type(self, c: list) -> TensorType:
        shape, dtype_tok = c
        dtype_name = dtype_tok[0]
        dtype = canonical_dtype(dtype_name)
        if dtype is None:
            raise RxError(
                f"unknown dtype '{dtype_name}'",
                self._loc(dtype_tok),
                notes=("dtypes are: bool i8 i16 i32 i64 u8 u16 u32 f16 bf16 f32 f64",),
            )
        for d in reversed(shape):  # (the right one first: see _not_a_dim)
            if isinstance(d, bool) or not isinstance(d, _DIM_TYPES):
                self._not_a_dim(d)
        return _new_TensorType(shape, dtype)

    def shape(self, c: list) -> tuple:
        return tuple(v for v in c if v is not None)

    def empty_shape(self, c: list) -> tuple:
        return ()

    def tuple_type(self, c: list) -> TupleType:
        return _new_TupleType(tuple(t for t in c if t is not None))

    def storage_type(self, c: list):
        return STORAGE

    def object_type(self, c: list):
        return OBJECT


class _KwArg:
    """A ``key=value`` argument on its way into a call (never part of the IR)."""

    __slots__ = ("key", "value", "loc")

    def __init__(self, key: str, value: Any, loc: Loc):
        self.key = key
        self.value = value
        self.loc = loc


def _grammar() -> str:
    return resources.files("relaxc.frontend").joinpath("rx.lark").read_text(encoding="utf-8")


# Token kinds below 0 in _Tables.group_token (a lexer group that is not a terminal by itself).
_SKIP = -1
_NAME_OR_KEYWORD = -2
_BAD_CHAR = -3
# Actions below the reductions' ~r (see _Tables):
_ERROR = -(1 << 20)  # a (state, token) pair with no action: a syntax error
_UNIT = -(1 << 21)  # _UNIT - nonterminal: reduce by a pass-through rule to it


class _Tables:
    """lark's LALR table for rx.lark, in lists indexed by small integers, and the rule shapers.

    * ``action[state][token]``: a state ``>= 0`` to shift to; ``~r`` to reduce by rule ``r``;
      ``_UNIT - nonterminal`` to reduce by a rule of one symbol whose value passes through
      unchanged (``?expr: opcall``), which only changes the state; or ``_ERROR``.
    * ``goto[state][nonterminal]``: the state after reducing to ``nonterminal``.
    * ``rules[r]``: ``(length, shaper, nonterminal)``; ``shaper`` is a function
      ``(builder, children) -> value`` (None for the pass-through rules).
    """

    def __init__(self) -> None:
        lark = Lark(_grammar(), parser="lalr", lexer=RxLexer, maybe_placeholders=True)
        self.lark = lark
        table = lark.parser.parser.parser.parse_table
        self.lark_states = table.states  # for the expected tokens of a syntax error
        # Terminals whose text no rule keeps (punctuation) may take the whitespace after them.
        kept = {
            sym.name
            for rule in lark.rules
            for sym in rule.expansion
            if sym.is_term and (rule.options.keep_all_tokens or not sym.filter_out)
        }
        lexer = RxLexer(lark.lexer_conf, space_after={t.name for t in lark.terminals} - kept)
        self.master = lexer.master

        terminals = sorted({t.name for t in lark.terminals} | {"$END"})
        self.terminal_names = terminals
        token = {name: i for i, name in enumerate(terminals)}
        self.end_token = token["$END"]
        self.name_token = token[KEYWORD_OR_NAME]
        self.keywords = {text: token[name] for text, name in lexer.keywords.items()}
        special = {SKIP: _SKIP, KEYWORD_OR_NAME: _NAME_OR_KEYWORD, BAD_CHAR: _BAD_CHAR, None: _BAD_CHAR}
        self.group_token = [special[k] if k in special else token[k] for k in lexer.group_kinds]

        nonterminals = sorted({r.origin.name for r in lark.rules})
        nonterminal = {name: i for i, name in enumerate(nonterminals)}
        rule_index = {rule: i for i, rule in enumerate(lark.rules)}
        shapers = _compile_shapers(lark.rules)
        self.rules = [
            (len(rule.expansion), shapers[i], nonterminal[rule.origin.name]) for i, rule in enumerate(lark.rules)
        ]

        n_states = len(table.states)
        assert sorted(table.states) == list(range(n_states)), "lark's LALR states are not 0..n-1"
        self.action = [[_ERROR] * len(terminals) for _ in range(n_states)]
        self.goto: list[list[int | None]] = [[None] * len(nonterminals) for _ in range(n_states)]
        for state, actions in table.states.items():
            for symbol, (kind, arg) in actions.items():
                if symbol in token:
                    if kind.name == "Shift":
                        self.action[state][token[symbol]] = arg
                    elif self.rules[rule_index[arg]][1] is None:  # pass-through
                        self.action[state][token[symbol]] = _UNIT - nonterminal[arg.origin.name]
                    else:
                        self.action[state][token[symbol]] = ~rule_index[arg]
                else:
                    assert kind.name == "Shift", f"reduce on nonterminal {symbol}"
                    self.goto[state][nonterminal[symbol]] = arg
        self.start_state = table.start_states["start"]
        self.end_state = table.end_states["start"]

    def parse(self, text: str, builder: "_Builder") -> Any:
        """Run the LALR automaton over ``text``; raises LexError or _SyntaxError.

        The stack is ``states + [state]``; ``values[i]`` is the value of the symbol that led
        from ``states[i]`` to the next state. lark's parser does the same (ParserState).
        """
        action = self.action
        goto = self.goto
        group_token = self.group_token
        keywords = self.keywords
        name_token = self.name_token
        unit = _UNIT
        rules = [(n, None if shape is None else shape.__get__(builder), lhs) for n, shape, lhs in self.rules]
        state = self.start_state
        states: list[int] = []
        values: list = []
        push_state = states.append
        push_value = values.append
        for m in self.master.finditer(text):
            t = group_token[m.lastindex]
            if t < 0:
                if t == _SKIP:
                    continue
                if t == _NAME_OR_KEYWORD:
                    t = keywords.get(m[0], name_token)
                else:
                    pos = m.start()
                    raise LexError(pos, *line_col(text, pos), text[pos])
            a = action[state][t]
            while a < 0:  # reduce (as many times as the lookahead asks)
                if a <= unit:  # pass-through rules: only the state changes (often a chain)
                    below = goto[states[-1]]
                    state = below[unit - a]
                    a = action[state][t]
                    while a <= unit:
                        state = below[unit - a]
                        a = action[state][t]
                    continue
                if a == _ERROR:
                    raise _SyntaxError(states + [state], m)
                n, shape, lhs = rules[~a]
                if n == 1:
                    values[-1] = shape(values[-1:])
                    state = goto[states[-1]][lhs]
                elif n:
                    children = values[-n:]
                    del values[1 - n :]
                    values[-1] = shape(children)
                    del states[1 - n :]
                    state = goto[states[-1]][lhs]
                else:
                    push_value(shape([]))
                    push_state(state)
                    state = goto[state][lhs]
                a = action[state][t]
            push_state(state)  # shift
            state = a
            push_value(m)
        # End of input: reduce until the start symbol is accepted.
        t = self.end_token
        while True:
            a = action[state][t]
            if a >= 0 or a == _ERROR:  # (lark never shifts $END: it accepts in the end state)
                raise _SyntaxError(states + [state], None)
            if a <= unit:
                n, shape, lhs = 1, None, unit - a
            else:
                n, shape, lhs = rules[~a]
            children = values[len(values) - n :]
            del values[len(values) - n :]
            values.append(children[0] if shape is None else shape(children))
            states.append(state)
            del states[len(states) - n :]
            state = goto[states[-1]][lhs]
            if state == self.end_state:
                return values[-1]

    def expected(self, stack: list[int]) -> set[str]:
        """The terminals the parser in ``stack`` (its states, current last) can go on with.

        LALR tables merge lookaheads, so a state may have actions on terminals whose
        reductions end in an error further down; each candidate is therefore tried on a copy
        of the stack (lark's ``accepts()`` does the same) and only those it shifts are kept.
        """
        out = set()
        for name in self.lark_states[stack[-1]]:
            if name.isupper() and self._accepts(stack, self.terminal_names.index(name)):
                out.add(name)
        return out

    def _accepts(self, stack: list[int], t: int) -> bool:
        stack = list(stack)
        while True:
            a = self.action[stack[-1]][t]
            if a == _ERROR:
                return False
            if a >= 0:
                return True
            n, lhs = (1, _UNIT - a) if a <= _UNIT else (self.rules[~a][0], self.rules[~a][2])
            if n:
                del stack[len(stack) - n:]
            state = self.goto[stack[-1]][lhs]
            if state is None:
                return False
            if state == self.end_state:
                return t == self.end_token
            stack.append(state)


class _SyntaxError(Exception):
    """A token (``None``: the end of the input) with no action in the last state of ``stack``."""

    def __init__(self, stack: list[int], match: re.Match | None):
        super().__init__(stack, match)
        self.stack = stack
        self.match = match


def _should_expand(symbol: Any) -> bool:
    return not symbol.is_term and symbol.name.startswith("_")


def _compile_shapers(rules: list) -> list[Callable | None]:
    """One function per rule giving its value, shaping children as lark's ParseTreeBuilder.

    Mirrors lark's ``maybe_create_child_filter`` (with ``maybe_placeholders``) and
    ``ExpandSingleChild``: filtered-out terminals are dropped, ``None`` stands for an absent
    ``[optional]``, children of ``_rule``s are spliced into their parent, a ``?rule`` whose
    shaped children are a single value is that value. A ``_rule`` (lark's ``x*``/``x+``
    helpers) has no builder method; its value is the list of its shaped children.
    """
    src: list[str] = []
    shapers: list[Callable | str | None] = []
    for k, rule in enumerate(rules):
        expansion = rule.expansion
        flags = rule.options.empty_indices
        if flags:  # how many Nones go before each position (and at the end)
            nones_at = [len(ones) for ones in "".join(str(int(b)) for b in flags).split("0")]
        else:
            nones_at = [0] * (len(expansion) + 1)
        items: list[str] = []  # Python expressions of the shaped children, in order
        nones = 0
        for i, sym in enumerate(expansion):
            nones += nones_at[i]
            if rule.options.keep_all_tokens or not (sym.is_term and sym.filter_out):
                items += ["None"] * nones
                nones = 0
                items.append(f"*c[{i}]" if _should_expand(sym) else f"c[{i}]")
        items += ["None"] * (nones + nones_at[len(expansion)])
        name = rule.alias or rule.options.template_source or rule.origin.name
        has_method = hasattr(_Builder, name)
        if rule.options.expand1 and not rule.alias and not any(x.startswith("*") for x in items):
            if len(items) == 1:  # ?rule with one child: the child itself
                if items[0] == "c[0]" and len(expansion) == 1:
                    shapers.append(None)
                    continue
                src.append(f"def _r{k}(self, c):\n    return {items[0]}\n")
                shapers.append(f"_r{k}")
                continue
        elif rule.options.expand1 and not rule.alias:
            if not has_method:
                raise TypeError(f"rule {rule} may need a _Builder method '{name}'")
            src.append(
                f"def _r{k}(self, c):\n    c = [{', '.join(items)}]\n"
                f"    return c[0] if len(c) == 1 else self.{name}(c)\n"
            )
            shapers.append(f"_r{k}")
            continue
        if has_method and items == [f"c[{i}]" for i in range(len(expansion))]:
            shapers.append(getattr(_Builder, name))  # children as they are
            continue
        if has_method:
            src.append(f"def _r{k}(self, c):\n    return self.{name}([{', '.join(items)}])\n")
        elif name.startswith("_"):
            if items and items[0] == "*c[0]":  # left recursion: extend the list in place
                rest = items[1:]
                body = "    v = c[0]\n"
                if len(rest) == 1 and not rest[0].startswith("*"):
                    body += f"    v.append({rest[0]})\n"
                elif rest:
                    body += f"    v += [{', '.join(rest)}]\n"
                src.append(f"def _r{k}(self, c):\n{body}    return v\n")
            else:
                src.append(f"def _r{k}(self, c):\n    return [{', '.join(items)}]\n")
        else:
            raise TypeError(f"grammar rule {rule} has no _Builder method '{name}'")
        shapers.append(f"_r{k}")
    namespace: dict[str, Any] = {}
    exec(compile("".join(src), "<rx.lark rule shapers>", "exec"), namespace)
    return [namespace[s] if isinstance(s, str) else s for s in shapers]


@functools.lru_cache(maxsize=1)
def _tables() -> _Tables:
    return _Tables()


_TOKEN_WORDS = {
    "LPAR": "'('",
    "RPAR": "')'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "COLON": "':'",
    "EQUAL": "'='",
    "DOT": "'.'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "__ANON_0": "'->'",
    "LOCAL": "a local name (%x)",
    "GLOBAL": "a function name (@f)",
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "STRING": "a string",
    "FN": "'fn'",
    "ATTRS": "'attrs'",
    "CALL": "'call'",
    "INVOKE": "'invoke'",
    "RETURN": "'return'",
    "OUTS": "'outs'",
    "$END": "end of file",
}


def _describe(name: str, parser: Lark) -> str:
    if name in _TOKEN_WORDS:
        return _TOKEN_WORDS[name]
    for term in parser.terminals:
        if term.name == name and term.pattern.type == "str":
            return f"'{term.pattern.value}'"
    return name.lower()


def parse_module(text: str, filename: str = "<input>") -> Module:
    """Parse ``text`` (the contents of ``filename``) into a module, or raise RxError."""
    tables = _tables()
    try:
        with _cycle_collector_paused():
            return tables.parse(text, _Builder(filename, text))
    except LexError as e:
        ch = e.char
        shown = repr(ch) if ch.isprintable() else f"U+{ord(ch):04X}"
        hint = ""
        if ch == '"':
            hint = " (a string that is not closed on its line?)"
        raise RxError(f"unexpected character {shown}{hint}", Loc(filename, e.line, e.column)) from None
    except _SyntaxError as e:
        expected = sorted({_describe(t, tables.lark) for t in tables.expected(e.stack)})
        hint = ", ".join(expected[:8]) + (", ..." if len(expected) > 8 else "")
        m = e.match
        if m is None:
            line, col = _end_position(text)
            shown, width = "end of file", 1
        else:
            token = text[m.start() : m.end(m.lastindex)]  # (without the whitespace it may take)
            line, col = line_col(text, m.start())
            shown, width = f"'{token}'", max(1, len(token))
        raise RxError(f"unexpected {shown}; expected {hint}", Loc(filename, line, col, width)) from None


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Run the body without Python's cycle collector, and file what it made as old objects.

    A parse allocates millions of small objects, none of them in a reference cycle. With
    the collector on, it would traverse the young ones over and over as the module grows,
    and then promote the finished module generation by generation, each time traversing it
    all (a third of the parse time, and half of the verifier's on a big module), finding
    nothing. So it is paused; and then (unless the program uses gc.freeze itself) freeze +
    unfreeze moves every young object straight to the oldest generation, which is a list
    splice in CPython, not a traversal. Full collections still examine them as usual.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    # Point after the last non-empty line.
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
    return len(lines), len(lines[-1]) + 1
