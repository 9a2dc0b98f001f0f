"""The LALR(1) engine of the .rx parser: lark's parse table, driven by a small loop.

The grammar (``rx.lark``) is compiled by lark, and this module runs lark's own LALR table
(states, shift/reduce actions, gotos) with its own driver loop, fed by the single-regex lexer
of :mod:`.lexer`. The loop does what lark's LALR parser does, minus the per-token Token
objects and the generic callback wrappers: each grammar rule is turned, once, into a small
function (a *shaper*) that shapes the rule's children exactly as lark's tree builder would
(punctuation dropped, ``None`` for an absent ``[optional]``, ``?rule`` with one child passed
through, ``*``/``+`` repetitions spliced into the parent) and calls the builder method named
after the rule or its alias. So the builder (:class:`~.ir_builder.IRBuilder`) runs as the
parser reduces, and no parse tree is built. That is several times faster than lark building
a tree (``benchmarks/parse.py`` measures it).

The table is lark's private data: :func:`lark_parse_table` is the one place that reaches it,
and it fails with a :class:`LarkInternalsError` naming the installed lark version and the
supported range (:data:`SUPPORTED_LARK`, the bound in ``pyproject.toml``) if lark's
internals have moved. The rest of what this module reads from lark is its compiled grammar
(``Lark.rules``, ``Lark.terminals``, ``Lark.lexer_conf`` and the rules' options).

Syntax errors are raised as :class:`LalrSyntaxError` (the parser's state stack and the
offending token); :meth:`LalrTables.expected` says which terminals could have come there.
The caller (:mod:`.parser`) turns them into messages.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import lark as _lark_package
from lark import Lark

from .lexer import BAD_CHAR, KEYWORD_OR_NAME, SKIP, LexError, RxLexer, line_col

SUPPORTED_LARK = ">=1.1.9,<2"
"""The lark versions whose private LALR table this engine is known to read (as pyproject.toml)."""


class LarkInternalsError(RuntimeError):
    """lark's private LALR table is not where (or what) this engine expects."""


def lark_parse_table(parser: Lark) -> Any:
    """The LALR parse table lark built for ``parser`` (a ``Lark(..., parser="lalr")``).

    This is lark's private ``parser.parser.parser.parse_table`` (a ``ParseTable``: ``states``
    maps a state to ``{symbol: (action, arg)}`` where ``action.name`` is ``"Shift"`` (arg: the
    next state) or ``"Reduce"`` (arg: the rule); ``start_states`` and ``end_states`` map a
    start symbol to its states): the only place relaxc reaches into lark's parser (what else
    this module reads is lark's compiled grammar: ``Lark.rules``, ``Lark.terminals``).
    Raises :class:`LarkInternalsError`, naming the installed lark version and the supported
    range, if the table is not there or not of that shape.
    """
    path = "Lark.parser.parser.parser.parse_table"
    try:
        table = parser.parser.parser.parser.parse_table
        states, start_states, end_states = table.states, table.start_states, table.end_states
        for actions in states.values():
            for kind, _arg in actions.values():
                if kind.name not in ("Shift", "Reduce"):
                    raise TypeError(f"an action named {kind.name!r}")
        if "start" not in start_states or "start" not in end_states:
            raise KeyError("no states for the start symbol 'start'")
    except (AttributeError, TypeError, ValueError, KeyError) as e:
        version = getattr(_lark_package, "__version__", "of unknown version")
        raise LarkInternalsError(
            f"relaxc's parser cannot read the LALR table of the installed lark {version}: "
            f"lark's private {path} is not where or what it expects ({type(e).__name__}: {e}). "
            f"relaxc supports lark{SUPPORTED_LARK}; install one, "
            f"e.g. pip install 'lark{SUPPORTED_LARK}'"
        ) from e
    return table


# Token kinds below 0 in LalrTables.group_token (a lexer group that is not a terminal by itself).
_SKIP = -1
_NAME_OR_KEYWORD = -2
_BAD_CHAR = -3
# Actions below the reductions' ~r (see LalrTables):
_ERROR = -(1 << 20)  # a (state, token) pair with no action: a syntax error
_UNIT = -(1 << 21)  # _UNIT - nonterminal: reduce by a pass-through rule to it


class LalrTables:
    """lark's LALR table for rx.lark, in lists indexed by small integers, and the rule shapers.

    * ``action[state][token]``: a state ``>= 0`` to shift to; ``~r`` to reduce by rule ``r``;
      ``_UNIT - nonterminal`` to reduce by a rule of one symbol whose value passes through
      unchanged (``?expr: opcall``), which only changes the state; or ``_ERROR``.
    * ``goto[state][nonterminal]``: the state after reducing to ``nonterminal``.
    * ``rules[r]``: ``(length, shaper, nonterminal)``; ``shaper`` is a function
      ``(builder, children) -> value`` (None for the pass-through rules).

    ``grammar`` is the text of rx.lark; ``builder_class`` has a method per rule (or alias)
    that makes a value (see :func:`compile_shapers`), and :meth:`parse` takes an instance.
    """

    def __init__(self, grammar: str, builder_class: type) -> None:
        lark = Lark(grammar, parser="lalr", lexer=RxLexer, maybe_placeholders=True)
        self.lark = lark
        table = lark_parse_table(lark)
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
        special = {
            SKIP: _SKIP,
            KEYWORD_OR_NAME: _NAME_OR_KEYWORD,
            BAD_CHAR: _BAD_CHAR,
            None: _BAD_CHAR,
        }
        self.group_token = [special[k] if k in special else token[k] for k in lexer.group_kinds]

        nonterminals = sorted({r.origin.name for r in lark.rules})
        nonterminal = {name: i for i, name in enumerate(nonterminals)}
        rule_index = {rule: i for i, rule in enumerate(lark.rules)}
        shapers = compile_shapers(lark.rules, builder_class)
        self.rules = [
            (len(rule.expansion), shapers[i], nonterminal[rule.origin.name])
            for i, rule in enumerate(lark.rules)
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

    def parse(self, text: str, builder: Any) -> Any:
        """Run the LALR automaton over ``text``, building with ``builder``; raises LexError or
        LalrSyntaxError.

        The stack is ``states + [state]``; ``values[i]`` is the value of the symbol that led
        from ``states[i]`` to the next state. lark's parser does the same (ParserState).
        """
        action = self.action
        goto = self.goto
        group_token = self.group_token
        keywords = self.keywords
        name_token = self.name_token
        unit = _UNIT
        rules = [
            (n, None if shape is None else shape.__get__(builder), lhs)
            for n, shape, lhs in self.rules
        ]
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
                    raise LalrSyntaxError(states + [state], m)
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
                raise LalrSyntaxError(states + [state], None)
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
                del stack[len(stack) - n :]
            state = self.goto[stack[-1]][lhs]
            if state is None:
                return False
            if state == self.end_state:
                return t == self.end_token
            stack.append(state)


class LalrSyntaxError(Exception):
    """A token (``None``: the end of the input) with no action in the last state of ``stack``."""

    def __init__(self, stack: list[int], match: re.Match | None):
        super().__init__(stack, match)
        self.stack = stack
        self.match = match


def _should_expand(symbol: Any) -> bool:
    return not symbol.is_term and symbol.name.startswith("_")


def compile_shapers(rules: list, builder_class: type) -> list[Callable | None]:
    """One function per rule giving its value, shaping children as lark's ParseTreeBuilder.

    Mirrors lark's ``maybe_create_child_filter`` (with ``maybe_placeholders``) and
    ``ExpandSingleChild``: filtered-out terminals are dropped, ``None`` stands for an absent
    ``[optional]``, children of ``_rule``s are spliced into their parent, a ``?rule`` whose
    shaped children are a single value is that value. A ``_rule`` (lark's ``x*``/``x+``
    helpers) has no builder method; its value is the list of its shaped children. The others
    call the method of ``builder_class`` named after the rule's alias or the rule.
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
        has_method = hasattr(builder_class, name)
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
                raise TypeError(f"rule {rule} may need a builder method '{name}'")
            src.append(
                f"def _r{k}(self, c):\n    c = [{', '.join(items)}]\n"
                f"    return c[0] if len(c) == 1 else self.{name}(c)\n"
            )
            shapers.append(f"_r{k}")
            continue
        if has_method and items == [f"c[{i}]" for i in range(len(expansion))]:
            shapers.append(getattr(builder_class, name))  # children as they are
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
            raise TypeError(f"grammar rule {rule} has no builder method '{name}'")
        shapers.append(f"_r{k}")
    namespace: dict[str, Any] = {}
    exec(compile("".join(src), "<rx.lark rule shapers>", "exec"), namespace)
    return [namespace[s] if isinstance(s, str) else s for s in shapers]
