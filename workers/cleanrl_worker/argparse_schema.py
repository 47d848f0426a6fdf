"""Read a CleanRL script's argparse options from its source, without running it.

CleanRL scripts import torch at module level, and the daemon must not, so the
options are found by parsing the script with ``ast``: every call
``<something>.add_argument("--flag", type=..., default=..., help=...)`` in the
file becomes an ``Arg``. Defaults are evaluated by a tiny evaluator that knows
literals, arithmetic (``int(1e6)``, ``25e3``) and CleanRL's
``os.path.basename(__file__).rstrip(".py")``; anything else is left without a
default (the script then uses its own).

Standard library only: the daemon imports this through the worker descriptor.
"""
from __future__ import annotations

import ast
import operator
import os
from dataclasses import dataclass
from typing import Any


@dataclass
class Arg:
    flag: str                 # "--learning-rate"
    dest: str                 # "learning_rate", the attribute on the script's args
    type: str                 # JSON schema type: integer, number, boolean, string
    action: str = "store"     # store, store_true, store_false
    default: Any = None
    has_default: bool = False
    help: str = ""
    choices: list | None = None
    nargs: Any = None         # "+", "*" or an int: a list value
    bool_parser: str = ""     # how a boolean is spelled on the command line: "strtobool" or "bool"

    @property
    def name(self) -> str:
        """The key users write in params: the flag without its dashes."""
        return self.flag.lstrip("-")

    def to_argv(self, value: Any) -> list[str]:
        """This option with ``value`` as command-line words for the script."""
        if self.action == "store_true":
            return [self.flag] if value else []
        if self.action == "store_false":
            return [] if value else [self.flag]
        if value is None:
            return []  # the script's own default is None; argparse cannot spell None
        if self.nargs is not None and isinstance(value, list):
            return [self.flag] + [_word(v, self) for v in value]
        return [self.flag, _word(value, self)]


def _word(value: Any, arg: Arg) -> str:
    if isinstance(value, bool):
        if arg.bool_parser == "bool":
            return "1" if value else ""  # type=bool: any non-empty string is True
        return "true" if value else "false"  # strtobool
    return repr(value) if isinstance(value, float) else str(value)


class Unevaluable(Exception):
    """A default expression this module does not evaluate."""


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}
_CASTS = {"int": int, "float": float, "str": str, "bool": bool}
_STR_METHODS = {"rstrip", "lstrip", "strip", "replace", "lower", "upper"}


def evaluate_default(node: ast.AST, script_path: str) -> Any:
    """Value of a default expression, or raise Unevaluable."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = evaluate_default(node.operand, script_path)
        if not isinstance(value, (int, float)):
            raise Unevaluable
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = evaluate_default(node.left, script_path)
        right = evaluate_default(node.right, script_path)
        if not all(isinstance(v, (int, float)) for v in (left, right)):
            raise Unevaluable
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [evaluate_default(e, script_path) for e in node.elts]
    if isinstance(node, ast.Name) and node.id == "__file__":
        return script_path
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        args = [evaluate_default(a, script_path) for a in node.args]
        if isinstance(func, ast.Name) and func.id in _CASTS and len(args) == 1:
            return _CASTS[func.id](args[0])
        # os.path.basename(__file__): CleanRL's default --exp-name
        if ast.unparse(func) == "os.path.basename" and len(args) == 1 and isinstance(args[0], str):
            return os.path.basename(args[0])
        if isinstance(func, ast.Attribute) and func.attr in _STR_METHODS:
            target = evaluate_default(func.value, script_path)
            if isinstance(target, str) and all(isinstance(a, str) for a in args):
                return getattr(target, func.attr)(*args)
    raise Unevaluable


def _type_of(node: ast.AST | None) -> tuple[str, str]:
    """JSON type of an argparse ``type=`` expression, and how booleans parse."""
    if node is None:
        return "string", ""
    if isinstance(node, ast.Name):
        if node.id == "int":
            return "integer", ""
        if node.id == "float":
            return "number", ""
        if node.id == "bool":
            return "boolean", "bool"
        if node.id == "strtobool":  # returns 0/1, read as a boolean
            return "boolean", "strtobool"
        return "string", ""
    # CleanRL's booleans: type=lambda x: bool(strtobool(x))
    if isinstance(node, ast.Lambda) and "strtobool" in ast.unparse(node.body):
        return "boolean", "strtobool"
    return "string", ""


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _arg_from_call(call: ast.Call, script_path: str) -> Arg | None:
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    long_flags = [f for f in flags if f.startswith("--")]
    if not long_flags:
        return None  # positional or short-only options: not offered as params
    flag = long_flags[0]

    action_node = _keyword(call, "action")
    action = action_node.value if isinstance(action_node, ast.Constant) else "store"
    if action not in ("store", "store_true", "store_false"):
        return None  # counts, appends, custom actions: left to the script's default

    dest_node = _keyword(call, "dest")
    dest = dest_node.value if isinstance(dest_node, ast.Constant) else flag.lstrip("-").replace("-", "_")

    if action == "store":
        json_type, bool_parser = _type_of(_keyword(call, "type"))
    else:
        json_type, bool_parser = "boolean", ""

    arg = Arg(flag=flag, dest=dest, type=json_type, action=action, bool_parser=bool_parser)
    if action == "store_true":
        arg.default, arg.has_default = False, True
    elif action == "store_false":
        arg.default, arg.has_default = True, True

    default_node = _keyword(call, "default")
    if default_node is not None:
        try:
            arg.default, arg.has_default = evaluate_default(default_node, script_path), True
        except Unevaluable:
            arg.has_default = False
    if arg.has_default:
        arg.default = _coerce_default(arg)

    help_node = _keyword(call, "help")
    if isinstance(help_node, ast.Constant) and isinstance(help_node.value, str):
        arg.help = help_node.value
    elif help_node is not None:
        arg.help = ast.unparse(help_node)

    choices_node = _keyword(call, "choices")
    if choices_node is not None:
        try:
            arg.choices = list(evaluate_default(choices_node, script_path))
        except (Unevaluable, TypeError):
            arg.choices = None

    nargs_node = _keyword(call, "nargs")
    if isinstance(nargs_node, ast.Constant) and nargs_node.value not in (None, "?"):
        arg.nargs = nargs_node.value
    return arg


def _coerce_default(arg: Arg) -> Any:
    """The default as the script would see it once parsed, in JSON terms.

    argparse does not convert a non-string default, so ``type=int,
    default=25e3`` gives the float 25000.0: offered here as the integer 25000.
    """
    value = arg.default
    if arg.nargs is not None or value is None:
        return value
    if arg.type == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if arg.type == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if arg.type == "boolean" and isinstance(value, int):
        return bool(value)
    return value


def parse_script_args(source: str, script_path: str) -> list[Arg]:
    """Every long option the script's parser defines, in source order."""
    tree = ast.parse(source, filename=script_path)
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr == "add_argument"]
    calls.sort(key=lambda node: (node.lineno, node.col_offset))
    found: dict[str, Arg] = {}
    for call in calls:
        arg = _arg_from_call(call, script_path)
        if arg is not None:
            found[arg.name] = arg  # defined twice: the last definition wins, as in argparse
    return list(found.values())


def property_schema(arg: Arg) -> dict[str, Any]:
    """The JSON schema of one option."""
    item_type = arg.type
    if arg.nargs is not None:
        prop: dict[str, Any] = {"type": "array", "items": {"type": item_type}}
    else:
        prop = {"type": item_type}
    if arg.has_default:
        if arg.default is None:
            prop["type"] = [prop["type"], "null"]
        prop["default"] = arg.default
    if arg.choices:
        prop["enum"] = list(arg.choices)
    if arg.help:
        prop["description"] = arg.help
    return prop
