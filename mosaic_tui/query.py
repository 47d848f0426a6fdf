"""The runs query language: one language for the runs table's `/` filter, `mosaic ls --where`
and `mosaic report --where` (docs/results.md).

    lr < 3e-4 and algo in (ppo, dqn)
    params.gamma == 0.99 or not tag = baseline
    mean_return > 400 and steps >= 1e6 and state = succeeded
    created > 3d and env = "CartPole-*"

A comparison is ``KEY OP VALUE`` (``=`` ``==`` ``!=`` ``<`` ``<=`` ``>`` ``>=``, ``~`` contains,
``!~`` does not) or ``KEY [not] in (V, V ...)``; ``not`` binds tighter than ``and``, ``and``
tighter than ``or``, parentheses group; two terms need ``and`` or ``or`` between them. A
bare word (or a quoted phrase) is found in the run's name, id, worker, algo, env, state, tags or
note, as the plain filter does; ``tag:NAME`` and ``#NAME`` ask for a tag. Text with no operator,
keyword or parenthesis is the plain-words filter, matched as it always was (``is_query``).

Keys: the run's fields (FIELDS), ``params.KEY`` (dotted into nested params), ``config.KEY``, and
a bare name that is no field is a param (``lr`` is ``params.lr``; ``-`` and ``_`` are one). A run
without the key matches no comparison on it (``!=`` included); ``not (k = v)`` matches it.

Parsing (``parse``) finds syntax errors; ``compile`` checks keys and value types against the
keys the runs have (``Keys``). Either raises QueryError: one line naming the problem and the
column it is at. The compiled predicate is plain closures: ten thousand runs are tested in a
few milliseconds, for the table's filter at every key typed.
"""
from __future__ import annotations

import difflib
import fnmatch
import itertools
import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable

from daemon.protocol import STATES, mean_return
from workers.sdk.modes import run_mode

DEFAULT_WINDOW = 20


class QueryError(ValueError):
    """A query that cannot be read or run: ``message`` and the 1-based ``column`` it points at."""

    def __init__(self, message: str, column: int, text: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.column = column
        self.text = text

    def __str__(self) -> str:
        return f"column {self.column}: {self.message}"

    def line(self, label: str = "query") -> str:
        """One line: the query quoted, the column and what is wrong there."""
        return f"{label} {self.text!r}: {self}"


# -- tokens ------------------------------------------------------------------------------------
_OPS = ("==", "!=", "<=", ">=", "!~", "=", "<", ">", "~")
_KEYWORDS = ("and", "or", "not", "in")
_WORD_RE = re.compile(r"""[^\s()=!<>~,'"]+""")
_NUMBER_RE = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_ENG_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([kMGT])$")
_ENG = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_DURATION_RE = re.compile(r"^((?:\d+\.?\d*|\.\d+)(?:s|m|h|d|w))+$")
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(s|m|h|d|w)")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2}))?)?$")


@dataclass
class Token:
    kind: str          # op, lparen, rparen, comma, kw, word, string, end
    text: str
    column: int        # 1-based
    value: Any = None  # word: its typed reading (number, duration, date), else None


def _typed_word(text: str) -> tuple[str, Any]:
    """A word's reading as a value: ('number', float), ('duration', seconds), ('date', (lo, hi)),
    or ('word', text)."""
    if _NUMBER_RE.match(text):
        return "number", float(text)
    m = _ENG_RE.match(text)
    if m:
        return "number", float(m.group(1)) * _ENG[m.group(2)]
    if _DURATION_RE.match(text):
        return "duration", sum(float(n) * _SECONDS[u] for n, u in _DURATION_PART.findall(text))
    m = _DATE_RE.match(text)
    if m:
        y, mo, d, hh, mm, ss = m.groups()
        try:
            start = datetime(int(y), int(mo), int(d), int(hh or 0), int(mm or 0), int(ss or 0))
        except ValueError:
            return "word", text
        step = timedelta(days=1) if hh is None else timedelta(minutes=1) if ss is None else timedelta(seconds=1)
        return "date", (start.timestamp(), (start + step).timestamp())
    return "word", text


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        col = i + 1
        if c in "'\"":
            j, out = i + 1, []
            while j < n and text[j] != c:
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                out.append(text[j])
                j += 1
            if j >= n:
                raise QueryError(f"the quote {c} opened here is not closed", col, text)
            tokens.append(Token("string", "".join(out), col))
            i = j + 1
            continue
        if c == "(":
            tokens.append(Token("lparen", c, col))
            i += 1
            continue
        if c == ")":
            tokens.append(Token("rparen", c, col))
            i += 1
            continue
        if c == ",":
            tokens.append(Token("comma", c, col))
            i += 1
            continue
        for op in _OPS:
            if text.startswith(op, i):
                tokens.append(Token("op", op, col))
                i += len(op)
                break
        else:
            m = _WORD_RE.match(text, i)
            if not m:   # a lone "!": the only character no token starts with
                raise QueryError(f"{c!r} here is not an operator (!= or !~)", col, text)
            word = m.group(0)
            if word.lower() in _KEYWORDS:
                tokens.append(Token("kw", word.lower(), col))
            else:
                kind, value = _typed_word(word)
                tokens.append(Token("word", word, col, (kind, value)))
            i = m.end()
    tokens.append(Token("end", "", n + 1))
    return tokens


def is_query(text: str) -> bool:
    """Whether text is a query (an operator, a keyword or a parenthesis in it) rather than the
    plain-words filter. Text that cannot even be tokenized (an open quote) counts as a query,
    so that its error is shown."""
    try:
        tokens = tokenize(text)
    except QueryError:
        return True
    return any(t.kind in ("op", "kw", "lparen", "rparen") for t in tokens)


# -- syntax tree -------------------------------------------------------------------------------
@dataclass
class Node:
    kind: str                       # and, or, not, cmp, in, word, tag
    column: int = 0
    children: list[Node] = field(default_factory=list)
    key: str = ""
    op: str = ""
    values: list[Token] = field(default_factory=list)
    negate: bool = False            # not in


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def fail(self, message: str, tok: Token) -> QueryError:
        return QueryError(message, tok.column, self.text)

    def parse(self) -> Node:
        if self.peek().kind == "end":
            raise self.fail("the query is empty", self.peek())
        node = self.or_expr()
        tok = self.peek()
        if tok.kind == "rparen":
            raise self.fail("this ) closes no (", tok)
        if tok.kind in ("word", "string", "lparen") or (tok.kind == "kw" and tok.text == "not"):
            # no "and" implied: a word typed on its way to "and" would filter the rows by itself
            raise self.fail(f"and or or is missing before {tok.text!r}", tok)
        if tok.kind != "end":
            raise self.fail(f"unexpected {tok.text!r}", tok)
        return node

    def or_expr(self) -> Node:
        first = self.and_expr()
        parts = [first]
        while self.peek().kind == "kw" and self.peek().text == "or":
            self.take()
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else Node("or", first.column, parts)

    def and_expr(self) -> Node:
        first = self.not_expr()
        parts = [first]
        while self.peek().kind == "kw" and self.peek().text == "and":
            self.take()
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else Node("and", first.column, parts)

    def not_expr(self) -> Node:
        tok = self.peek()
        if tok.kind == "kw" and tok.text == "not":
            self.take()
            return Node("not", tok.column, [self.not_expr()])
        return self.atom()

    def atom(self) -> Node:
        tok = self.peek()
        if tok.kind == "lparen":
            self.take()
            if self.peek().kind == "rparen":
                raise self.fail("empty parentheses", self.peek())
            node = self.or_expr()
            close = self.peek()
            if close.kind != "rparen":
                if close.kind == "end":
                    raise self.fail("this ( is not closed", tok)
                raise self.fail(f"expected ) but found {close.text!r}", close)
            self.take()
            return node
        if tok.kind in ("word", "string"):
            self.take()
            nxt = self.peek()
            if nxt.kind == "op":
                self.take()
                value = self.peek()
                if value.kind not in ("word", "string"):
                    what = "the end" if value.kind == "end" else repr(value.text)
                    raise self.fail(f"{tok.text} {nxt.text} needs a value, found {what}", value if
                                    value.kind != "end" else nxt)
                self.take()
                return Node("cmp", tok.column, key=tok.text, op=nxt.text, values=[value])
            if nxt.kind == "kw" and (nxt.text == "in" or (nxt.text == "not" and self.peek(1).kind == "kw"
                                                           and self.peek(1).text == "in")):
                negate = nxt.text == "not"
                self.take()
                if negate:
                    self.take()
                return Node("in", tok.column, key=tok.text, values=self.value_list(), negate=negate)
            low = tok.text.lower()
            if tok.kind == "string":      # a quoted phrase: plain words with their spaces
                return Node("word", tok.column, values=[tok])
            if low.startswith("tag:") or low.startswith("#"):
                name = tok.text[4:] if low.startswith("tag:") else tok.text[1:]
                if not name:
                    raise self.fail(f"{tok.text} names no tag", tok)
                return Node("tag", tok.column, values=[Token("word", name, tok.column)])
            return Node("word", tok.column, values=[tok])
        if tok.kind == "end":
            prev = self.tokens[self.i - 1] if self.i else tok
            raise self.fail(f"the query ends after {prev.text!r}: a term is missing", prev)
        if tok.kind == "rparen":
            raise self.fail("this ) closes no (", tok)
        if tok.kind == "op":
            raise self.fail(f"{tok.text} needs a key before it (e.g. lr {tok.text} 3e-4)", tok)
        if tok.kind == "kw" and tok.text == "in":
            raise self.fail("in needs a key before it (e.g. algo in (ppo, dqn))", tok)
        if tok.kind == "kw":
            raise self.fail(f"{tok.text} needs a term before it", tok)
        raise self.fail(f"unexpected {tok.text!r}", tok)

    def value_list(self) -> list[Token]:
        open_ = self.peek()
        if open_.kind != "lparen":
            raise self.fail("in takes a list in parentheses, e.g. (ppo, dqn)", open_)
        self.take()
        values: list[Token] = []
        while True:
            tok = self.peek()
            if tok.kind == "rparen":
                if not values:
                    raise self.fail("the list is empty", tok)
                self.take()
                return values
            if tok.kind == "comma":
                self.take()
                continue
            if tok.kind in ("word", "string"):
                values.append(self.take())
                continue
            if tok.kind == "kw":     # a value spelled like a keyword (an env named "in"...) is a value
                self.take()
                values.append(Token("word", tok.text, tok.column, ("word", tok.text)))
                continue
            if tok.kind == "end":
                raise self.fail("this list's ( is not closed", open_)
            raise self.fail(f"{tok.text!r} cannot be in a list of values", tok)


def parse(text: str) -> Node:
    """The syntax tree of a query; QueryError for text that is no query."""
    return _Parser(text).parse()


def keys_used(node: Node) -> set[str]:
    """The keys a tree compares (lower case, as typed), and "" when it has plain words or tags."""
    if node.kind in ("cmp", "in"):
        return {node.key.lower()}
    if node.kind in ("word", "tag"):
        return {""}
    out: set[str] = set()
    for child in node.children:
        out |= keys_used(child)
    return out


def needs_whole_records(node: Node) -> bool:
    """Whether a query reads more than a brief listing row carries (config params, trial...)."""
    return any(ALIASES.get(k, k) not in BRIEF_FIELDS for k in keys_used(node))


# -- keys --------------------------------------------------------------------------------------
def _summary(run: dict[str, Any]) -> dict[str, Any]:
    return run.get("summary") or {}


def _config(run: dict[str, Any]) -> dict[str, Any]:
    return run.get("config") or {}


def _elapsed(run: dict[str, Any], now: float) -> float | None:
    from mosaic_tui.fmt import elapsed
    return elapsed(run, now)


def _eta(run: dict[str, Any], now: float) -> float | None:
    from mosaic_tui.fmt import eta
    return eta(run)


def _progress(run: dict[str, Any], now: float) -> float | None:
    from mosaic_tui.fmt import progress
    return progress(run)


def _created(run: dict[str, Any], now: float) -> float | None:
    created = run.get("created_at")
    if created:
        return created
    return ulid_time(str(run.get("id") or ""))


_CROCKFORD = {c: i for i, c in enumerate("0123456789ABCDEFGHJKMNPQRSTVWXYZ")}


def ulid_time(run_id: str) -> float | None:
    """The creation time a run id (a ULID) carries in its first 10 characters: the brief listing
    has no created_at, and a `created > 3d` query needs no more."""
    if len(run_id) < 10:
        return None
    value = 0
    for c in run_id[:10].upper():
        if c not in _CROCKFORD:
            return None
        value = value * 32 + _CROCKFORD[c]
    return value / 1000.0


_SWEEP_RUN = re.compile(r"^(.*)-t(\d+)-s\d+$")


def sweep_name(run: dict[str, Any]) -> str | None:
    """The name of a run's sweep: a sweep names its runs <sweep>-t<trial>-s<seed> and records its
    id in the run; a run renamed since gives the id."""
    if run.get("sweep") is None:
        return None
    m = _SWEEP_RUN.match(str(run.get("name") or ""))
    if m and run.get("trial") is not None and int(m.group(2)) == run["trial"]:
        return m.group(1)
    return run["sweep"]


def _group(run: dict[str, Any], now: float) -> str | None:
    if run.get("sweep") is None or run.get("trial") is None:
        return None
    return f"{sweep_name(run)}-t{run['trial']}"


def run_return(run: dict[str, Any], window: int) -> float | None:
    """The mean of the run's last ``window`` episode returns, as the table shows it (a brief
    listing's row carries it worked out for its window)."""
    summary = _summary(run)
    if "mean_return" in summary and "returns" not in summary:
        return summary["mean_return"]
    return mean_return(summary.get("returns") or [], window)


# name -> (kind, getter(run, now, window)); kinds: str, num, state, tags, date, duration
FIELDS: dict[str, tuple[str, Callable[[dict[str, Any], float, int], Any]]] = {
    "name": ("str", lambda r, now, w: r.get("name")),
    "id": ("str", lambda r, now, w: r.get("id")),
    "worker": ("str", lambda r, now, w: r.get("worker")),
    "algo": ("str", lambda r, now, w: r.get("algo")),
    "env": ("str", lambda r, now, w: r.get("env")),
    "state": ("state", lambda r, now, w: r.get("state")),
    "note": ("str", lambda r, now, w: r.get("note") or ""),
    "tag": ("tags", lambda r, now, w: r.get("tags") or []),
    "sweep": ("str", lambda r, now, w: sweep_name(r)),
    "sweep_id": ("str", lambda r, now, w: r.get("sweep")),
    "trial": ("num", lambda r, now, w: r.get("trial")),
    "group": ("str", lambda r, now, w: _group(r, now)),
    "mode": ("str", lambda r, now, w: run_mode(r)),
    "seed": ("num", lambda r, now, w: _config(r).get("seed")),
    "device": ("str", lambda r, now, w: _config(r).get("device")),
    "steps": ("num", lambda r, now, w: _summary(r).get("steps")),
    "total_steps": ("num", lambda r, now, w: _summary(r).get("total_steps") or _config(r).get("steps")),
    "sps": ("num", lambda r, now, w: _summary(r).get("sps")),
    "episodes": ("num", lambda r, now, w: _summary(r).get("episodes")),
    "mean_return": ("num", lambda r, now, w: run_return(r, w)),
    "best_return": ("num", lambda r, now, w: _summary(r).get("best_return")),
    "best_step": ("num", lambda r, now, w: _summary(r).get("best_step")),
    "progress": ("num", lambda r, now, w: _progress(r, now)),
    "elapsed": ("duration", lambda r, now, w: _elapsed(r, now)),
    "eta": ("duration", lambda r, now, w: _eta(r, now)),
    "created": ("date", lambda r, now, w: _created(r, now)),
    "started": ("date", lambda r, now, w: r.get("started_at")),
    "ended": ("date", lambda r, now, w: r.get("ended_at")),
}
ALIASES = {"tags": "tag", "return": "mean_return", "best": "best_return", "algorithm": "algo",
           "created_at": "created", "started_at": "started", "ended_at": "ended", "status": "state"}
# short names for params each worker spells its own way (CleanRL's learning-rate, RLlib's lr): used
# when no run has the short name itself
PARAM_ALIASES = {"lr": "learning_rate"}
# the fields a brief listing row (daemon Store.list_brief) carries: `mosaic ls --where` asks for
# whole records only when a query needs another
BRIEF_FIELDS = frozenset({"name", "id", "worker", "algo", "env", "state", "note", "tag", "sweep", "mode", "steps",
                          "total_steps", "sps", "episodes", "mean_return", "best_return", "best_step", "progress",
                          "elapsed", "eta", "created", "started", "ended", ""})


def canonical(key: str) -> str:
    """Keys as users type them: one case, ``-`` and ``_`` alike."""
    return key.lower().replace("-", "_")


class Keys:
    """The config keys the runs have: each param's spellings (a worker's own ``learning-rate``
    found as ``learning_rate`` too) and the kinds of value it holds, and the config's own keys.
    Built once per run list; None in ``compile`` skips the check of unknown keys."""

    def __init__(self, runs: Iterable[dict[str, Any]] = ()) -> None:
        self.params: dict[str, set[str]] = {}       # canonical dotted path -> spellings
        self.kinds: dict[str, set[str]] = {}        # canonical dotted path -> "num", "str", "bool"...
        self.config: set[str] = set()
        self.count = 0
        # runs of one worker share their keys and the kinds of their values: each shape is
        # walked once (ten thousand runs in a few milliseconds)
        config_shapes: set[tuple] = set()
        param_shapes: set[tuple] = set()
        for run in runs:
            self.count += 1
            config = _config(run)
            shape = tuple(config)
            if shape not in config_shapes:
                config_shapes.add(shape)
                self.config.update(canonical(k) for k in config if k != "params")
            params = config.get("params")
            if isinstance(params, dict):
                shape = tuple((k, v.__class__) for k, v in params.items())
                if shape not in param_shapes:
                    if not any(cls is dict for _, cls in shape):   # nested: the inner keys may differ
                        param_shapes.add(shape)
                    self._walk(params, "")

    def _walk(self, params: dict[str, Any], prefix: str) -> None:
        for key, value in params.items():
            path = prefix + str(key)
            canon = canonical(path)
            self.params.setdefault(canon, set()).add(path)
            self.kinds.setdefault(canon, set()).add(_kind_of(value))
            if isinstance(value, dict):
                self._walk(value, path + ".")

    def names(self) -> list[str]:
        return sorted(set(FIELDS) | set(ALIASES) | set(self.params) | {f"params.{k}" for k in self.params}
                      | {f"config.{k}" for k in self.config}
                      | {short for short, long in PARAM_ALIASES.items() if long in self.params})


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "num"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "str"
    return "json"


def _dig(value: Any, parts: list[str]) -> Any:
    for part in parts:
        if not isinstance(value, dict):
            return _MISSING
        if part in value:
            value = value[part]
            continue
        canon = canonical(part)
        for k in value:
            if canonical(str(k)) == canon:
                value = value[k]
                break
        else:
            return _MISSING
    return value


_MISSING = object()


@dataclass
class Resolved:
    """A key made into a getter: ``kind`` as in FIELDS, or "any" for config values."""
    name: str
    kind: str
    get: Callable[[dict[str, Any], float, int], Any]


def resolve(key: str, keys: Keys | None, column: int = 1, text: str = "") -> Resolved:
    """A key's getter: a field, ``params.X`` / ``config.X`` (dotted), or a bare param name."""
    low = key.lower()
    name = ALIASES.get(low, low)
    if name in FIELDS:
        kind, get = FIELDS[name]
        return Resolved(name, kind, get)
    if low.startswith("config."):
        parts = key.split(".")[1:]
        if not all(parts):
            raise QueryError(f"{key} names no config key", column, text)
        if parts[0].lower() == "params":
            return resolve("params." + ".".join(parts[1:]), keys, column, text)
        if keys is not None and keys.count and canonical(parts[0]) not in keys.config:
            raise QueryError(_unknown(key, keys), column, text)
        if [canonical(p) for p in parts] == ["mode"]:   # as the mode field reads it (an older play's "train")
            return Resolved(key, "any", FIELDS["mode"][1])
        return Resolved(key, "any", lambda r, now, w, parts=parts: _dig(_config(r), parts))
    path = key[len("params."):] if low.startswith("params.") else key
    parts = path.split(".")
    if not all(parts):
        raise QueryError(f"{key} names no param", column, text)
    if keys is not None and keys.count and canonical(path) not in keys.params:
        alias = PARAM_ALIASES.get(canonical(path))
        if alias is None or alias not in keys.params:
            raise QueryError(_unknown(key, keys), column, text)
        path, parts = alias, [alias]
    spellings = sorted(keys.params.get(canonical(path), ())) if keys is not None else []
    if len(parts) == 1:
        first = [spellings[0]] if len(spellings) == 1 else []
        only = first[0] if first else path

        def get(r, now, w):
            params = _config(r).get("params")
            if not isinstance(params, dict):
                return _MISSING
            if only in params:
                return params[only]
            return _dig(params, parts)
        return Resolved(path, "any", get)
    return Resolved(path, "any", lambda r, now, w: _dig(_config(r).get("params"), parts))


def _unknown(key: str, keys: Keys) -> str:
    dotted = canonical(key).startswith("params.")    # params.X suggested only to who typed params.
    names = [n for n in keys.names() if n.startswith("params.") == dotted]
    close = difflib.get_close_matches(canonical(key), names, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else " (no run has it: a field, params.KEY or config.KEY)"
    return f"unknown key {key}{hint}"


# -- compiling ---------------------------------------------------------------------------------
Pred = Callable[[dict[str, Any]], bool]


@dataclass
class Leaf:
    """A comparison, plain word or tag of a compiled query, taken apart so that a table can
    keep what it found: ``read(run)`` the run's value (its haystack for a word), ``test(value)``
    whether it matches. ``column``: what ``read`` reads, the same for every leaf reading it
    (values kept per column); ``sig``: what the leaf asks, the same in the next query typed
    (its matches kept), None when its answer moves with the clock (dates, durations)."""
    column: tuple
    sig: tuple | None
    read: Callable[[dict[str, Any]], Any]
    test: Callable[[Any], bool]


@dataclass
class Query:
    """A compiled query: ``test(run)``; ``hay(run)`` gives a run's plain-words haystack
    (runs_model.haystack, cached by the table). ``leaves``: id(node) -> Leaf, for ``filter``
    with a MatchCache."""
    text: str
    node: Node
    test: Pred
    keys: set[str]
    leaves: dict[int, Leaf] = field(default_factory=dict)

    def filter(self, runs: list[dict[str, Any]], cache: MatchCache | None = None) -> list[dict[str, Any]]:
        """The runs that match, in their order. With ``cache`` (kept by a caller filtering the
        same list again: the table at each key typed), each comparison's matches are a bit mask
        over the list, kept while the list is the same object: typing the last term of
        ``a < 1 and b > 2`` tests only that term against the runs, on values read once."""
        if cache is None or not self.leaves:
            test = self.test
            return [r for r in runs if test(r)]
        cache.use(runs)
        return cache.pick(self._mask(self.node, cache))

    def _mask(self, node: Node, cache: MatchCache) -> int:
        if node.kind == "and":
            mask = self._mask(node.children[0], cache)
            for child in node.children[1:]:
                if not mask:
                    break
                mask &= self._mask(child, cache)
            return mask
        if node.kind == "or":
            mask = 0
            for child in node.children:
                mask |= self._mask(child, cache)
            return mask
        if node.kind == "not":
            return cache.full ^ self._mask(node.children[0], cache)
        return cache.mask(self.leaves[id(node)])


def word_leaf(word: str, hay: Callable[[dict[str, Any]], tuple[str, set[str]]]) -> Leaf:
    """A plain word (lower case) found in a run's haystack (runs_model.haystack)."""
    return Leaf(("hay",), ("word", word), hay, lambda h: word in h[0])


def tag_leaf(tag: str, hay: Callable[[dict[str, Any]], tuple[str, set[str]]]) -> Leaf:
    """A run tagged ``tag`` (lower case) exactly."""
    return Leaf(("hay",), ("tag", tag), hay, lambda h: tag in h[1])


_TO_DIGITS = bytes.maketrans(b"\x00\x01", b"01")
_TO_FLAGS = bytes.maketrans(b"01", b"\x00\x01")


class MatchCache:
    """What a query's leaves found over one list of runs: each leaf's matches as an int, bit i
    for runs[i] (``and`` is ``&``: ten thousand runs in a few words), and the values each column
    read. Forgotten when another list comes (the runs changed, or their order)."""

    MAX_MASKS = 512       # leaves kept: every prefix of every term typed since the list came

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] | None = None
        self.full = 0
        self.columns: dict[tuple, list[Any]] = {}
        self.masks: dict[tuple, int] = {}

    def use(self, runs: list[dict[str, Any]]) -> None:
        if runs is not self.runs:
            self.runs = runs
            self.full = (1 << len(runs)) - 1
            self.columns.clear()
            self.masks.clear()

    def mask(self, leaf: Leaf) -> int:
        if leaf.sig is not None:
            hit = self.masks.get(leaf.sig)
            if hit is not None:
                return hit
        values = self.columns.get(leaf.column)
        if values is None:
            read = leaf.read
            values = self.columns[leaf.column] = [read(r) for r in self.runs]
        flags = bytes(map(leaf.test, values))       # a bool is 0 or 1
        mask = int(flags[::-1].translate(_TO_DIGITS), 2) if flags else 0
        if leaf.sig is not None:
            if len(self.masks) >= self.MAX_MASKS:
                self.masks.clear()
            self.masks[leaf.sig] = mask
        return mask

    def all_of(self, runs: list[dict[str, Any]], leaves: list[Leaf]) -> list[dict[str, Any]]:
        """The runs every leaf matches (the plain-words filter: each word, each tag:NAME)."""
        self.use(runs)
        mask = self.full
        for leaf in leaves:
            if not mask:
                break
            mask &= self.mask(leaf)
        return self.pick(mask)

    def pick(self, mask: int) -> list[dict[str, Any]]:
        if not mask:
            return []
        if mask == self.full:
            return list(self.runs)
        flags = bin(mask)[:1:-1].encode().translate(_TO_FLAGS)   # runs[0]'s bit first
        return list(itertools.compress(self.runs, flags))


def compile_query(text: str, keys: Keys | None = None, now: float | None = None, window: int = DEFAULT_WINDOW,
                  hay: Callable[[dict[str, Any]], tuple[str, set[str]]] | None = None,
                  memo: dict[tuple[str, int], dict[str, tuple[dict, Any]]] | None = None) -> Query:
    """Parse and compile ``text``; QueryError names the first problem and its column. ``memo``:
    kept across compiles by a caller that filters the same records again (the runs table at
    each key typed): the figures worked out of a record (MEMO_FIELDS), by run id, while the
    record is the same object."""
    node = parse(text)
    if hay is None:
        from mosaic_tui.runs_model import haystack as hay
    ctx = _Ctx(text, keys, time.time() if now is None else now, window, hay, memo)
    return Query(text, node, ctx.compile(node), keys_used(node), ctx.leaves)


# figures a getter works out of a record (the mean of its last returns: 10,000 of them cost ~50 ms)
MEMO_FIELDS = frozenset({"mean_return"})


def _memoized(resolved: Resolved, window: int, memo: dict) -> Resolved:
    cache = memo.setdefault((resolved.name, window), {})
    get = resolved.get

    def cached(r, now, w):
        hit = cache.get(r["id"])
        if hit is not None and hit[0] is r:
            return hit[1]
        value = get(r, now, w)
        cache[r["id"]] = (r, value)
        return value
    return Resolved(resolved.name, resolved.kind, cached)


@dataclass
class _Ctx:
    text: str
    keys: Keys | None
    now: float
    window: int
    hay: Callable[[dict[str, Any]], tuple[str, set[str]]]
    memo: dict | None = None
    leaves: dict[int, Leaf] = field(default_factory=dict)

    def fail(self, message: str, column: int) -> QueryError:
        return QueryError(message, column, self.text)

    def compile(self, node: Node) -> Pred:
        if node.kind in ("and", "or"):
            # nested pairs of plain closures: all()/any() over a generator cost twice as much a run
            preds = [self.compile(c) for c in node.children]
            pred = preds[0]
            for nxt in preds[1:]:
                if node.kind == "and":
                    pred = (lambda a, b: lambda r: a(r) and b(r))(pred, nxt)
                else:
                    pred = (lambda a, b: lambda r: a(r) or b(r))(pred, nxt)
            return pred
        if node.kind == "not":
            inner = self.compile(node.children[0])
            return lambda r: not inner(r)
        if node.kind == "word":
            word = node.values[0].text.lower()
            hay = self.hay
            self.leaves[id(node)] = word_leaf(word, hay)
            return lambda r: word in hay(r)[0]
        if node.kind == "tag":
            tag = node.values[0].text.lower()
            hay = self.hay
            self.leaves[id(node)] = tag_leaf(tag, hay)
            return lambda r: tag in hay(r)[1]
        resolved = resolve(node.key, self.keys, node.column, self.text)
        if self.memo is not None and resolved.name in MEMO_FIELDS:
            resolved = _memoized(resolved, self.window, self.memo)
        get, now, window = resolved.get, self.now, self.window
        if node.kind == "in":
            tests = [self.value_test(resolved, "=", v, node) for v in node.values]
            negate = node.negate

            def value_in(value):
                if value is _MISSING or value is None:
                    return False
                return any(t(value) for t in tests) != negate
            test = value_in
        else:
            one = self.value_test(resolved, node.op, node.values[0], node)

            def value_is(value):
                if value is _MISSING or value is None:
                    return False
                return one(value)
            test = value_is
        clocked = resolved.kind in ("date", "duration")     # read against this compile's now
        column = (resolved.name, resolved.kind, window, now if clocked else None)
        sig = None if clocked else (node.kind, resolved.name, resolved.kind, window, node.op, node.negate,
                                    tuple((v.kind, v.text) for v in node.values))
        self.leaves[id(node)] = Leaf(column, sig, lambda r: get(r, now, window), test)
        return lambda r: test(get(r, now, window))

    # one value against one literal ------------------------------------------------------------
    def value_test(self, key: Resolved, op: str, tok: Token, node: Node) -> Callable[[Any], bool]:
        lit_kind, lit = tok.value if tok.kind == "word" else ("string", tok.text)
        col = tok.column
        if key.kind == "tags":
            return self.tags_test(op, tok.text, col)
        if op in ("~", "!~"):
            needle = tok.text.lower()
            if key.kind in ("num", "date", "duration"):
                raise self.fail(f"{key.name} is a {_KIND_WORDS[key.kind]}: ~ finds text", col)
            if op == "~":
                return lambda v: needle in _text(v)
            return lambda v: needle not in _text(v)
        if key.kind == "state":
            state = tok.text.lower()
            if not any(ch in state for ch in "*?[") and state not in STATES:
                close = difflib.get_close_matches(state, STATES, n=2)
                hint = f" (did you mean {' or '.join(close)}?)" if close else f" (states: {', '.join(STATES)})"
                raise self.fail(f"no state is called {tok.text}{hint}", col)
            return self.text_test(op, tok.text, col, key)
        if key.kind == "str":
            return self.text_test(op, tok.text, col, key)
        if key.kind == "num":
            if lit_kind != "number":
                raise self.fail(f"{key.name} is a number: {tok.text} is not one", col)
            return _num_test(op, lit)
        if key.kind == "duration":
            if lit_kind not in ("number", "duration"):
                raise self.fail(f"{key.name} is a duration: {tok.text} is not one (90s, 5m, 2h, 1d)", col)
            return _num_test(op, lit)
        if key.kind == "date":
            return self.date_test(op, tok, lit_kind, lit, key, col)
        return self.any_test(op, tok, lit_kind, lit, key, col)

    def tags_test(self, op: str, tag: str, col: int) -> Callable[[Any], bool]:
        tag = tag.lower()
        if op in ("=", "=="):
            if any(ch in tag for ch in "*?["):
                return lambda v: any(fnmatch.fnmatchcase(str(t).lower(), tag) for t in v)
            return lambda v: any(str(t).lower() == tag for t in v)
        if op == "!=":
            return lambda v: all(str(t).lower() != tag for t in v)
        if op == "~":
            return lambda v: any(tag in str(t).lower() for t in v)
        if op == "!~":
            return lambda v: all(tag not in str(t).lower() for t in v)
        raise self.fail(f"tags are words: {op} does not order them (=, !=, ~, in)", col)

    def text_test(self, op: str, text: str, col: int, key: Resolved) -> Callable[[Any], bool]:
        low = text.lower()
        if op in ("=", "==", "!="):
            if any(ch in low for ch in "*?["):
                match = lambda v: fnmatch.fnmatchcase(_text(v), low)  # noqa: E731
            else:
                match = lambda v: _text(v) == low  # noqa: E731
            return match if op != "!=" else (lambda v: not match(v))
        return _order_test(op, low, _text)

    def date_test(self, op: str, tok: Token, lit_kind: str, lit: Any, key: Resolved, col: int):
        if lit_kind == "date":
            lo, hi = lit
        elif lit_kind == "duration":
            lo = hi = self.now - lit
        elif lit_kind == "word" and tok.text.lower() in ("today", "yesterday", "now"):
            word = tok.text.lower()
            if word == "now":
                lo = hi = self.now
            else:
                day = datetime.fromtimestamp(self.now).replace(hour=0, minute=0, second=0, microsecond=0)
                if word == "yesterday":
                    day -= timedelta(days=1)
                lo, hi = day.timestamp(), (day + timedelta(days=1)).timestamp()
        else:
            raise self.fail(f"{key.name} is a date: {tok.text} is not one (2026-11-20, 2026-11-20T08:30, today, "
                            "or an age: 3d is 3 days ago)", col)
        if op in ("=", "=="):
            return (lambda v: lo <= v < hi) if hi > lo else (lambda v: v == lo)
        if op == "!=":
            return (lambda v: not lo <= v < hi) if hi > lo else (lambda v: v != lo)
        if op == "<":
            return lambda v: v < lo
        if op == "<=":
            return (lambda v: v < hi) if hi > lo else (lambda v: v <= lo)
        if op == ">":
            return (lambda v: v >= hi) if hi > lo else (lambda v: v > lo)
        return lambda v: v >= lo

    def any_test(self, op: str, tok: Token, lit_kind: str, lit: Any, key: Resolved, col: int):
        """A config value, whose type is the value's own: a number literal compares with numbers,
        a word with text (and true/false/null with those), never across."""
        kinds = self.keys.kinds.get(canonical(key.name), set()) if self.keys is not None else set()
        ordering = op in ("<", "<=", ">", ">=")
        if lit_kind == "duration" and "num" in kinds:
            lit_kind = "number"      # a param in seconds: 2h is 7200
        if lit_kind == "number":
            number = lit
            numeric = _num_test(op, number)
            text = tok.text.lower()

            def test(v):
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    return numeric(v)
                if ordering or not isinstance(v, str):
                    return False
                return (v.lower() == text) == (op != "!=")
            return test
        if ordering and kinds and kinds <= {"num", "null"}:
            raise self.fail(f"{key.name} holds numbers: {tok.text} is not one", col)
        low = tok.text.lower()
        special = {"true": True, "false": False, "null": None, "none": None}
        if low in ("true", "false") and tok.kind == "word" and not ordering:
            want = special[low]
            return lambda v: (v is want) == (op != "!=") if isinstance(v, bool) else False
        if ordering:
            order = _order_test(op, low, _text)
            return lambda v: isinstance(v, str) and order(v)
        return self.text_test(op, tok.text, col, key)


_KIND_WORDS = {"num": "number", "date": "date", "duration": "duration"}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":")).lower()
    return str(value).lower()


def _num_test(op: str, lit: float) -> Callable[[Any], bool]:
    """A number against ``lit``; a bool, text or NaN never matches (NaN compares false anyway)."""
    number = (int, float)
    if op in ("=", "=="):
        return lambda v: v.__class__ is not bool and isinstance(v, number) and v == lit
    if op == "!=":
        return lambda v: v.__class__ is not bool and isinstance(v, number) and v != lit and v == v
    if op == "<":
        return lambda v: v.__class__ is not bool and isinstance(v, number) and v < lit
    if op == "<=":
        return lambda v: v.__class__ is not bool and isinstance(v, number) and v <= lit
    if op == ">":
        return lambda v: v.__class__ is not bool and isinstance(v, number) and v > lit
    return lambda v: v.__class__ is not bool and isinstance(v, number) and v >= lit


def _order_test(op: str, lit: Any, conv: Callable[[Any], Any]) -> Callable[[Any], bool]:
    if op == "<":
        return lambda v: (c := conv(v)) is not None and c < lit
    if op == "<=":
        return lambda v: (c := conv(v)) is not None and c <= lit
    if op == ">":
        return lambda v: (c := conv(v)) is not None and c > lit
    return lambda v: (c := conv(v)) is not None and c >= lit


class TableFilter:
    """The runs table's `/` text: plain words, or a query compiled when the text changes (the
    runs' keys read again only when the run list grew or shrank: a run's params never change).
    While the text does not compile (typed half-way: `lr <`), ``error`` says why and the last
    text that was whole stays in force, so the rows do not flicker at each letter."""

    def __init__(self) -> None:
        self.error: QueryError | None = None
        self._good: Query | str = ""
        self._compiled: tuple | None = None    # (text, window, keys) of the last compile
        self._keys: Keys | None = None
        self._keys_for: tuple[int, int] | None = None
        self._memo: dict = {}
        self.matches = MatchCache()             # what the query's terms found, over the sorted runs

    def keys(self, runs: dict[str, dict[str, Any]]) -> Keys:
        mark = (id(runs), len(runs))
        if self._keys is None or self._keys_for != mark:
            self._keys, self._keys_for = Keys(runs.values()), mark
            for cache in self._memo.values():    # records gone are forgotten
                for rid in [rid for rid in cache if rid not in runs]:
                    del cache[rid]
        return self._keys

    def warm(self, runs: dict[str, dict[str, Any]], some: Iterable[dict[str, Any]], window: int) -> None:
        """Work out ahead, while the app is idle, what the next query typed reads of ``some`` of
        the runs: the runs' keys, and the figures of MEMO_FIELDS (the mean of 10,000 runs' last
        returns cost ~200 ms, a key's paint more than once over)."""
        self.keys(runs)
        for name in MEMO_FIELDS:
            get = FIELDS[name][1]
            cache = self._memo.setdefault((name, window), {})
            for run in some:
                hit = cache.get(run["id"])
                if hit is None or hit[0] is not run:
                    cache[run["id"]] = (run, get(run, 0.0, window))

    def resolve(self, text: str, runs: dict[str, dict[str, Any]], window: int,
                hay: Callable[[dict[str, Any]], tuple[str, set[str]]]) -> Query | str:
        """What filters the rows: a compiled Query, or plain words (a str, "" for none). The dates
        in a query are read against the time it was compiled."""
        if not is_query(text):
            self.error, self._good, self._compiled = None, text, None
            return text
        keys = self.keys(runs)
        mark = (text, window, id(keys))
        if mark != self._compiled:
            self._compiled = mark
            try:
                self._good = compile_query(text, keys, window=window, hay=hay, memo=self._memo)
                self.error = None
            except QueryError as exc:
                self.error = exc
        return self._good


# -- columns and sorting by any key (mosaic ls --columns / --sort) ---------------------------------
def key_reader(key: str, keys: Keys | None, window: int = DEFAULT_WINDOW,
               now: float | None = None) -> Callable[[dict[str, Any]], Any]:
    """A run's value of ``key`` (None when it has none); QueryError for an unknown key."""
    resolved = resolve(key, keys, 1, key)
    at = time.time() if now is None else now

    def read(run: dict[str, Any]) -> Any:
        value = resolved.get(run, at, window)
        return None if value is _MISSING else value
    return read


def value_text(value: Any) -> str:
    """A key's value in a column: numbers short (3e-4, 0.99, 1e6), lists and dicts as JSON."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def sort_runs(runs: list[dict[str, Any]], key: str, keys: Keys | None, window: int = DEFAULT_WINDOW,
              ) -> list[dict[str, Any]]:
    """Runs by ``key`` (``-key``: descending): numbers before text, runs without it last."""
    descending = key.startswith("-")
    read = key_reader(key.lstrip("-"), keys, window)

    def rank(run):
        v = read(run)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return (0, -v if descending else v, "")
        if v is None:
            return (2, 0, "")
        return (1, 0, str(v).lower())
    ordered = sorted(runs, key=rank)
    if descending:   # text descending too, the runs without the key still last
        nums = [r for r in ordered if rank(r)[0] == 0]
        texts = [r for r in ordered if rank(r)[0] == 1][::-1]
        ordered = nums + texts + [r for r in ordered if rank(r)[0] == 2]
    return ordered
