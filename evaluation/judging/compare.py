"""Reads a sealed replay's snapshot (untrusted bytes written in the sandbox) and compares it with the recording.

The format is the one `sandbox/programs/snapshot.py` writes (its docstring is the specification).
`parse` trusts nothing: the size is capped before decoding, the nesting before the JSON parser recurses, and every
node must have exactly the keys and types of its kind (no duplicate keys, no NaN literals, only the known dtypes,
as many bytes as its shape and dtype say). `compare` names the first difference: structure, shapes, dtypes,
integers, booleans, strings, bytes and class names exactly; floating values within |replayed - recorded| <=
atol + rtol * |recorded|, NaN only where the recording has NaN. Shared references are compared by what they refer
to (an answer may copy what the reference returned as the same object), cycles once. A numpy scalar and a Python
scalar of its kind (np.float64 and float) are compared by value. A key or attribute the recording has not is a
difference, except in an argument's state when the call's names at entry (`AtEntry`, what the recorder read of the
arguments before the reference ran) show that no dict key or attribute of that name was there: an answer may add
working state the reference does not keep (Adam-style code's `state["step"]`), and that is said apart (`notes`),
not as a difference; the verdict still flags it for review (judging/verdict.py: EXTRA_STATE). A name the arguments
held at entry is still a difference: the reference removed it and the answer left it (an eviction that evicts
nothing, a `del self.pending` left out). With no names at entry (an older recording, a walk that
reached a cap) every extra key or attribute is a difference.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from sandbox.programs import snapshot

# The format's constants and its dtype table come from the program that writes it (one table for both sides).
VERSION, SAFE_INT, DEPTH_LIMIT, DTYPES = snapshot.VERSION, snapshot.SAFE_INT, snapshot.DEPTH_LIMIT, snapshot.DTYPES
ITEM_DTYPES = {"object", "str", "bytes"}
FLOAT_STRINGS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0.0": -0.0}
REASONS = {"bytes", "depth", "items", "digits"}
MAX_NDIM = 64
MAX_NAME = 1000

Kind = Literal["type", "shape", "dtype", "value", "structure"]


class SnapshotError(ValueError):
    """A snapshot that is not valid data of the format, with the path of its first problem."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class Value:
    """A parsed snapshot: its named roots, the nodes that carry an id, and where each was first written."""

    roots: Mapping[str, Any]
    targets: Mapping[int, dict[str, Any]]
    paths: Mapping[int, str]
    truncated: tuple[str, ...]  # where a cap was reached: what lies there was not recorded
    opaque: tuple[str, ...] = ()  # what is held by class and name only (a function, a file, a C object's state)


@dataclass(frozen=True)
class Difference:
    """The first place where a replay differs from its recording."""

    path: str
    kind: Kind
    abs_error: float | None
    rel_error: float | None
    message: str

    def words(self) -> str:
        """The difference as the judge and the proposed replay tests say it: where, what, and the largest error
        where it is a number the message does not state already."""
        said = f"at {self.path}: {self.message}" if self.path else self.message
        if self.abs_error is not None and "largest error" not in self.message:
            relative = f", {self.rel_error:.3g} relative" if self.rel_error is not None else ""
            said += f" (largest error {self.abs_error:.3g} absolute{relative})"
        return said


@dataclass(frozen=True)
class AtEntry:
    """A call's names at entry (snapshot.entry_names): every plain dict key's text and every attribute name anywhere
    in its arguments when it began, whichever container held them (a container the reference moved, swapped or
    rebuilt has no place of its own to look in)."""

    keys: frozenset[str]
    attrs: frozenset[str]


ENTRY_NAMES_MAX = 100_000  # names of one call: the snapshot's max_items


def entry_parse(text: object) -> AtEntry | None:
    """A recorded call's names at entry: None for no names (an older recording, a walk that reached a cap) and for
    anything that is not exactly {"keys": [str], "attrs": [str]} (then nothing is tolerated, as with none)."""
    if type(text) is not str:
        return None
    try:
        document = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except (ValueError, RecursionError):
        return None
    if type(document) is not dict or document.keys() != {"keys", "attrs"}:
        return None
    names = [document["keys"], document["attrs"]]
    for found in names:
        if type(found) is not list or len(found) > ENTRY_NAMES_MAX or any(type(n) is not str for n in found):
            return None
    return AtEntry(frozenset(names[0]), frozenset(names[1]))


class _Duplicate(dict[str, Any]):
    """A JSON object that repeated a key (json's hook has no path: the validator reports it)."""

    key = ""


class _Bad:
    """A JSON token the format does not allow (NaN, Infinity, an out-of-range number), reported with its path."""

    def __init__(self, what: str) -> None:
        self.what = what


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            duplicate = _Duplicate(out)
            duplicate.key = key
            return duplicate
        out[key] = value
    return out


def _int(text: str) -> int | _Bad:
    return int(text) if len(text) <= 17 else _Bad(f"an integer of {len(text)} digits (big ints are int nodes)")


def _float(text: str) -> float | _Bad:
    value = float(text)
    return value if math.isfinite(value) else _Bad(f"the number {text[:40]} overflows a float")


def _constant(text: str) -> _Bad:
    return _Bad(f"the literal {text} (not JSON; NaN and infinities are float nodes)")


# Every byte but quotes and brackets, dropped (after the escapes) to measure nesting without recursing.
_NOT_STRUCTURE = bytes(set(range(256)) - set(b'"[]{}'))
_TOKENS = re.compile(rb'"[^"]*"|[\[\]{}]')

_BASE_TAGS = {"int", "float", "complex", "bytes", "bytearray", "list", "tuple", "set", "frozenset", "dict", "truncated"}
_NODE_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    tag: (frozenset(required) | {"t"}, frozenset(optional))
    for tag, required, optional in (
        ("int", {"v"}, set()),
        ("float", {"v"}, set()),
        ("complex", {"re", "im"}, set()),
        ("bytes", {"b64"}, set()),
        ("bytearray", {"b64"}, {"id"}),
        ("list", {"items"}, {"id"}),
        ("tuple", {"items"}, {"id"}),
        ("set", {"items"}, {"id"}),
        ("frozenset", {"items"}, {"id"}),
        ("dict", {"items"}, {"id"}),
        ("record", {"class", "kind", "fields"}, {"id", "cut"}),
        ("object", {"class"}, {"id", "attrs", "base", "text", "cut"}),
        ("ndarray", {"dtype", "shape"}, {"id", "b64", "items", "class"}),
        ("npscalar", {"dtype", "b64"}, set()),
        ("tensor", {"dtype", "shape", "b64", "requires_grad"}, {"id", "param", "grad"}),
        ("torch", {"kind", "v"}, set()),
        ("opaque", {"class"}, {"id", "name", "error"}),
        ("ref", {"id"}, set()),
        ("truncated", {"reason"}, {"count"}),
    )
}


_key_text = snapshot.key_text  # one reading of a dict key for paths, comparison and the names at entry


def _plain_keys(items: list[Any]) -> list[str] | None:
    """The path texts of a dict's keys when all are plain values and distinct (matched by key, not by place)."""
    keys = [_key_text(pair[0]) if type(pair) is list else None for pair in items]
    plain = [key for key in keys if key is not None]
    return plain if len(plain) == len(keys) == len(set(plain)) else None


class _Parser:
    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.targets: dict[int, dict[str, Any]] = {}
        self.paths: dict[int, str] = {}
        self.refs: list[tuple[int, str]] = []
        self.truncated: list[str] = []
        self.opaque: list[str] = []

    def fail(self, path: str, message: str) -> SnapshotError:
        return SnapshotError(path, message)

    def keys(self, node: dict[str, Any], path: str, tag: str) -> None:
        required, optional = _NODE_KEYS[tag]
        missing = required - node.keys()
        if missing:
            raise self.fail(path, f"a {tag} node without {', '.join(sorted(missing))}")
        extra = node.keys() - required - optional
        if extra:
            raise self.fail(path, f"a {tag} node with unknown key(s) {', '.join(sorted(map(repr, extra)))[:200]}")

    def name(self, node: dict[str, Any], key: str, path: str) -> None:
        value = node[key]
        if type(value) is not str or not 0 < len(value) <= MAX_NAME:
            raise self.fail(path, f"{key} must be a str of 1 to {MAX_NAME} characters")

    def data(self, node: dict[str, Any], path: str, nbytes: int | None = None) -> None:
        """Decodes node's b64 into node["data"], checking its length against NBYTES before decoding."""
        text = node.pop("b64")
        if type(text) is not str:
            raise self.fail(path, "b64 must be a str")
        if nbytes is not None and len(text) != 4 * ((nbytes + 2) // 3):
            raise self.fail(path, f"{len(text)} base64 characters where its shape and dtype make {nbytes} bytes")
        try:
            node["data"] = data = binascii.a2b_base64(text, strict_mode=True)
        except (binascii.Error, ValueError):
            raise self.fail(path, "invalid base64") from None
        # Strict decoding leaves one freedom, the unused bits of the last quantum: one value, one spelling.
        tail = len(data) % 3 or 3
        if data and base64.b64encode(data[-tail:]).decode("ascii") != text[-4:]:
            raise self.fail(path, "base64 that is not in its canonical form")
        if nbytes is not None and len(node["data"]) != nbytes:
            raise self.fail(path, f"{len(node['data'])} bytes where its shape and dtype make {nbytes}")

    def shape(self, node: dict[str, Any], path: str) -> int:
        shape = node["shape"]
        if type(shape) is not list or len(shape) > MAX_NDIM or any(type(n) is not int or n < 0 for n in shape):
            raise self.fail(path, f"shape must be a list of at most {MAX_NDIM} integers >= 0")
        return math.prod(shape)

    def float_value(self, value: Any, path: str) -> None:
        if type(value) is float:
            if value == 0.0 and math.copysign(1.0, value) < 0:
                raise self.fail(path, "-0.0 as a number (it is written as the string '-0.0')")
        elif type(value) is not str or value not in FLOAT_STRINGS:
            raise self.fail(path, "a float must be a number with a fraction or one of " + ", ".join(FLOAT_STRINGS))

    def node(self, node: Any, path: str, depth: int) -> None:
        if depth > self.max_depth:
            raise self.fail(path, f"nested deeper than {self.max_depth}")
        kind = type(node)
        if node is None or kind is bool or kind is str:
            return
        if kind is int:
            if not -SAFE_INT <= node <= SAFE_INT:
                raise self.fail(path, "an integer outside +-2**53 as a number (it is an int node)")
            return
        if kind is float:
            self.float_value(node, path)
            return
        if kind is _Bad:
            raise self.fail(path, node.what)
        if kind is _Duplicate:
            raise self.fail(path, f"the key {node.key[:100]!r} twice in one object")
        if kind is list:
            raise self.fail(path, 'a JSON array as a node (a list is {"t": "list", "items": [...]})')
        if kind is not dict:
            raise self.fail(path, f"not a node ({kind.__name__})")
        tag = node.get("t")
        if type(tag) is not str or tag not in _NODE_KEYS:
            raise self.fail(path, f"unknown node kind {str(tag)[:40]!r}")
        self.keys(node, path, tag)
        if "id" in node and tag != "ref":
            ident = node["id"]
            if type(ident) is not int or ident < 0:
                raise self.fail(path, "id must be an integer >= 0")
            if ident in self.targets:
                raise self.fail(path, f"the id {ident} twice (first at {self.paths[ident]})")
            self.targets[ident], self.paths[ident] = node, path
        getattr(self, "node_" + tag)(node, path, depth)

    def node_int(self, node: dict[str, Any], path: str, depth: int) -> None:
        text = node["v"]
        if (
            type(text) is not str
            or not re.fullmatch(r"-?[1-9][0-9]{0,4299}", text)
            or -SAFE_INT <= int(text) <= SAFE_INT
        ):
            raise self.fail(path, "an int node holds the decimal digits of an integer outside +-2**53")
        node["value"] = int(text)

    def node_float(self, node: dict[str, Any], path: str, depth: int) -> None:
        if type(node["v"]) is not str:
            raise self.fail(path, "a float node's v must be one of " + ", ".join(FLOAT_STRINGS))
        self.float_value(node["v"], path)

    def node_complex(self, node: dict[str, Any], path: str, depth: int) -> None:
        self.float_value(node["re"], path + ".real")
        self.float_value(node["im"], path + ".imag")

    def node_bytes(self, node: dict[str, Any], path: str, depth: int) -> None:
        self.data(node, path)

    node_bytearray = node_bytes

    def items(self, node: dict[str, Any], path: str, depth: int) -> list[Any]:
        items = node["items"]
        if type(items) is not list:
            raise self.fail(path, "items must be a list")
        return items

    def node_list(self, node: dict[str, Any], path: str, depth: int) -> None:
        for index, item in enumerate(self.items(node, path, depth)):
            self.node(item, f"{path}[{index}]", depth + 1)

    node_tuple = node_set = node_frozenset = node_list

    def node_dict(self, node: dict[str, Any], path: str, depth: int) -> None:
        for index, pair in enumerate(self.items(node, path, depth)):
            if type(pair) is dict:  # the truncated node that closes a capped dict
                self.node(pair, f"{path}[<pair #{index}>]", depth + 1)
                if pair.get("t") != "truncated":
                    raise self.fail(f"{path}[<pair #{index}>]", "a dict item must be a [key, value] pair")
                continue
            if type(pair) is not list or len(pair) != 2:
                raise self.fail(f"{path}[<pair #{index}>]", "a dict item must be a [key, value] pair")
            self.node(pair[0], f"{path}<key #{index}>", depth + 1)
            self.node(pair[1], f"{path}[{_key_text(pair[0]) or f'<key #{index}>'}]", depth + 1)

    def fields(self, node: dict[str, Any], key: str, path: str, depth: int) -> None:
        fields = node[key]
        if type(fields) is _Duplicate:
            raise self.fail(path, f"the {key} name {fields.key[:100]!r} twice")
        if type(fields) is not dict:
            raise self.fail(path, f"{key} must be an object")
        for name, value in fields.items():
            if not 0 < len(name) <= MAX_NAME:
                raise self.fail(path, f"a name in {key} must be 1 to {MAX_NAME} characters")
            self.node(value, f"{path}.{name}", depth + 1)

    def cut(self, node: dict[str, Any], path: str) -> None:
        if "cut" in node and node["cut"] not in REASONS:
            raise self.fail(path, "cut must be one of " + ", ".join(sorted(REASONS)))

    def node_record(self, node: dict[str, Any], path: str, depth: int) -> None:
        self.name(node, "class", path)
        if node["kind"] not in ("namedtuple", "dataclass"):
            raise self.fail(path, "a record's kind is namedtuple or dataclass")
        self.cut(node, path)
        self.fields(node, "fields", path, depth)

    def node_object(self, node: dict[str, Any], path: str, depth: int) -> None:
        self.name(node, "class", path)
        self.cut(node, path)
        if "text" in node and (type(node["text"]) is not str or len(node["text"]) > MAX_NAME):
            raise self.fail(path, f"text must be a str of at most {MAX_NAME} characters")
        if "base" in node:
            base = node["base"]
            if type(base) is dict and base.get("t") not in _BASE_TAGS or type(base) in (list, _Duplicate, _Bad):
                raise self.fail(path, "an object's base is a builtin value")
            self.node(base, path, depth)  # the object's own value: at its depth, under its path
        if "attrs" in node:
            self.fields(node, "attrs", path, depth)

    def dtype(self, node: dict[str, Any], path: str, allowed: set[str] | dict[str, int]) -> str:
        dtype = node["dtype"]
        if type(dtype) is not str or dtype not in allowed:
            raise self.fail(path, f"unknown dtype {str(dtype)[:40]!r}")
        return dtype

    def node_ndarray(self, node: dict[str, Any], path: str, depth: int) -> None:
        dtype = self.dtype(node, path, DTYPES.keys() | ITEM_DTYPES)
        size = self.shape(node, path)
        if "class" in node:
            self.name(node, "class", path)
        if dtype in DTYPES:
            if "b64" not in node or "items" in node:
                raise self.fail(path, f"an array of {dtype} holds b64 and no items")
            self.data(node, path, size * DTYPES[dtype])
            return
        if "items" not in node or "b64" in node:
            raise self.fail(path, f"an array of {dtype} holds items and no b64")
        items = self.items(node, path, depth)
        closed = bool(items) and type(items[-1]) is dict and items[-1].get("t") == "truncated"
        if len(items) != size and not (closed and len(items) - 1 < size):
            raise self.fail(path, f"{len(items)} items where its shape makes {size}")
        for index, item in enumerate(items):
            self.node(item, f"{path}[{index}]", depth + 1)
            tag = item.get("t") if type(item) is dict else None
            if tag != "truncated" and (dtype == "str" and type(item) is not str or dtype == "bytes" and tag != "bytes"):
                raise self.fail(f"{path}[{index}]", f"an item of a {dtype} array that is not {dtype}")

    def node_npscalar(self, node: dict[str, Any], path: str, depth: int) -> None:
        self.data(node, path, DTYPES[self.dtype(node, path, DTYPES)])

    def node_tensor(self, node: dict[str, Any], path: str, depth: int) -> None:
        dtype = self.dtype(node, path, DTYPES)
        self.data(node, path, self.shape(node, path) * DTYPES[dtype])
        if type(node["requires_grad"]) is not bool:
            raise self.fail(path, "requires_grad must be a boolean")
        if "param" in node and node["param"] is not True:
            raise self.fail(path, "param is true when present")
        if "grad" in node:
            grad = node["grad"]
            if type(grad) is not dict or grad.get("t") not in ("tensor", "ref", "truncated"):
                raise self.fail(path + ".grad", "a tensor's grad is a tensor")
            self.node(grad, path + ".grad", depth + 1)

    def node_torch(self, node: dict[str, Any], path: str, depth: int) -> None:
        if node["kind"] not in ("Size", "dtype", "device"):
            raise self.fail(path, "a torch node's kind is Size, dtype or device")
        self.name(node, "v", path)

    def node_opaque(self, node: dict[str, Any], path: str, depth: int) -> None:
        self.opaque.append(path)
        for key in ("class", "name", "error"):
            if key in node:
                self.name(node, key, path)

    def node_ref(self, node: dict[str, Any], path: str, depth: int) -> None:
        if type(node["id"]) is not int or node["id"] < 0:
            raise self.fail(path, "a ref's id must be an integer >= 0")
        self.refs.append((node["id"], path))

    def node_truncated(self, node: dict[str, Any], path: str, depth: int) -> None:
        if node["reason"] not in REASONS:
            raise self.fail(path, "a truncated node's reason is one of " + ", ".join(sorted(REASONS)))
        if "count" in node and (type(node["count"]) is not int or node["count"] < 0):
            raise self.fail(path, "count must be an integer >= 0")
        self.truncated.append(path)


def _text(data: bytes, max_bytes: int) -> str:
    """The document's text: bytes within the size cap, UTF-8."""
    if type(data) is not bytes:
        raise SnapshotError("$", f"a snapshot is bytes, not {type(data).__name__}")
    if len(data) > max_bytes:
        raise SnapshotError("$", f"{len(data)} bytes, more than the {max_bytes} allowed")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SnapshotError("$", f"not UTF-8 (byte {error.start})") from None


def _depth_check(data: bytes, max_depth: int) -> None:
    """Each node level takes at most 3 JSON levels (a dict's items, its pair, the value): refuse more before json
    recurses into them."""
    limit, level = 3 * max_depth + 4, 0
    escaped = b"\\" in data  # arrays' base64 has none: skip two passes over it
    structure = data.replace(b"\\\\", b"").replace(b'\\"', b"") if escaped else data
    structure = structure.translate(None, _NOT_STRUCTURE)
    for token in _TOKENS.findall(structure):
        if token in (b"[", b"{"):
            level += 1
            if level > limit:
                raise SnapshotError("$", f"nested deeper than {max_depth} (more than {limit} JSON levels)")
        elif token in (b"]", b"}"):
            level -= 1


def _roots(text: str) -> dict:
    """The document's roots, its envelope checked: {"v": 1, "roots": {...}} and nothing else."""
    try:
        document = json.loads(
            text, object_pairs_hook=_pairs, parse_int=_int, parse_float=_float, parse_constant=_constant
        )
    except (json.JSONDecodeError, RecursionError) as error:
        raise SnapshotError("$", f"not JSON ({str(error)[:200]})") from None
    if type(document) is _Duplicate:
        raise SnapshotError("$", f"the key {document.key[:100]!r} twice in one object")
    if type(document) is not dict or document.keys() != {"v", "roots"}:
        raise SnapshotError("$", 'a snapshot is {"v": 1, "roots": {...}} and nothing else')
    if document["v"] != VERSION or type(document["v"]) is not int:
        raise SnapshotError("$.v", f"version {str(document['v'])[:20]}, where {VERSION} is known")
    roots = document["roots"]
    if type(roots) is _Duplicate:
        raise SnapshotError("$.roots", f"the root {roots.key[:100]!r} twice")
    if type(roots) is not dict or not 0 < len(roots) <= 64:
        raise SnapshotError("$.roots", "roots must be an object of 1 to 64 named values")
    return roots


def parse(data: bytes, *, max_bytes: int, max_depth: int) -> Value:
    """The snapshot in DATA, validated; SnapshotError (with the path of the first problem) when it is not one."""
    if not 1 <= max_depth <= DEPTH_LIMIT:
        raise ValueError(f"max_depth must be within 1..{DEPTH_LIMIT}")
    text = _text(data, max_bytes)
    _depth_check(data, max_depth)
    roots = _roots(text)
    parser = _Parser(max_depth)
    for name, node in roots.items():
        if not 0 < len(name) <= 200:
            raise SnapshotError("$.roots", "a root's name is 1 to 200 characters")
        try:
            parser.node(node, name, 0)
        except RecursionError:
            raise SnapshotError(name, "nested too deeply to read") from None
    for ident, path in parser.refs:
        if ident not in parser.targets:
            raise SnapshotError(path, f"a ref to the id {ident}, which no node has")
    return Value(
        roots=roots,
        targets=parser.targets,
        paths=parser.paths,
        truncated=tuple(parser.truncated),
        opaque=tuple(parser.opaque),
    )


def _float8_table(exponent_bits: int, bias: int, style: str) -> np.ndarray:
    """The float32 value of each of the 256 codes of a float8 format (style: ieee, fn or fnuz)."""
    mantissa_bits = 7 - exponent_bits
    values = np.empty(256, dtype=np.float32)
    top = (1 << exponent_bits) - 1
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exponent, mantissa = (code >> mantissa_bits) & top, code & ((1 << mantissa_bits) - 1)
        full = (1 << mantissa_bits) - 1
        if (style == "fnuz" and code == 0x80) or (style == "fn" and exponent == top and mantissa == full):
            value = math.nan
        elif style == "ieee" and exponent == top:
            value = math.inf if mantissa == 0 else math.nan
        elif exponent == 0:
            value = mantissa / (1 << mantissa_bits) * 2.0 ** (1 - bias)
        else:
            value = (1 + mantissa / (1 << mantissa_bits)) * 2.0 ** (exponent - bias)
        values[code] = sign * value if value == value else value
    return values


_FLOAT8 = {
    "float8_e4m3fn": _float8_table(4, 7, "fn"),
    "float8_e5m2": _float8_table(5, 15, "ieee"),
    "float8_e4m3fnuz": _float8_table(4, 8, "fnuz"),
    "float8_e5m2fnuz": _float8_table(5, 16, "fnuz"),
}
_NUMPY = {name: np.dtype(name).newbyteorder("<") for name in DTYPES if name in np.sctypeDict or name == "bool"}


def decode_array(dtype: str, data: bytes, shape: list[int]) -> np.ndarray:
    """The numbers of a raw-bytes node as a numpy array (bfloat16 and float8 widened to float32)."""
    if dtype == "bfloat16":
        bits = np.frombuffer(data, dtype="<u2").astype("<u4") << 16
        return bits.view("<f4").reshape(shape)
    if dtype in _FLOAT8:
        return _FLOAT8[dtype][np.frombuffer(data, dtype=np.uint8)].reshape(shape)
    return np.frombuffer(data, dtype=_NUMPY[dtype]).reshape(shape)


def _narrowest(value: float) -> str:
    """The narrowest float dtype that holds `value` exactly: "bfloat16" (its float32 bits end in 16 zeros),
    "float16", "float32", else "float64"."""
    try:
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        if struct.unpack("<f", struct.pack("<I", bits))[0] != value:
            return "float64"
    except OverflowError:
        return "float64"
    if not bits & 0xFFFF:
        return "bfloat16"
    try:
        return "float16" if struct.unpack("<e", struct.pack("<e", value))[0] == value else "float32"
    except OverflowError:
        return "float32"


def plain_dtype(*parts: float) -> str:
    """The dtype a plain Python float (or complex, by its parts) recorded by the reference tells it came from:
    "float32" ("complex64") when every part is exactly a float32 and one is no bfloat16 or float16 (a float32
    value's `.item()` or `.tolist()`: a float64 result is one by chance about once in 2**29); else "" (no dtype
    told, e.g. 0.5 or a bfloat16 value's `.item()`, which keep the default tolerance)."""
    found = {_narrowest(part) for part in parts if math.isfinite(part)}
    if "float64" in found or "float32" not in found:
        return ""
    return "float32" if len(parts) == 1 else "complex64"


def _describe(node: Any) -> str:
    if node is None or type(node) in (bool, int, float, str):
        return {type(None): "None", bool: "a bool", int: "an int", float: "a float", str: "a str"}[type(node)]
    tag = node["t"]
    if tag in ("record", "object", "opaque"):
        return f"{tag} {node['class']}"
    if tag in ("ndarray", "tensor"):
        return f"{tag} of {node['dtype']} {node['shape']}"
    return {"int": "an int", "float": "a float"}.get(tag, f"a {tag}")


def _kind(node: Any) -> str:
    if node is None:
        return "None"
    if type(node) is not dict:
        return type(node).__name__
    tag: str = node["t"]
    # A list and a tuple are one kind of sequence here: a paper's tests read items, and an honest answer may build
    # either where the reference built the other.
    return {"int": "int", "float": "float", "tuple": "list"}.get(tag, tag)


# The Python scalar kind each numpy scalar dtype is one of: the paper's assertions (assertEqual, assertAlmostEqual,
# assert_allclose) accept a numpy scalar where the reference returned a Python scalar of its kind, and the reverse.
_SCALAR_KIND = {
    name: ("bool" if name == "bool" else "complex" if "complex" in name else "float" if "float" in name else "int")
    for name in DTYPES
}


# Nodes of data: what an argument's state may hold beyond the recording's (a function, a method or an object could
# stand for a method of its class, which the snapshot does not name: never tolerated).
_DATA_TAGS = frozenset(
    ("int", "float", "complex", "bytes", "bytearray", "list", "tuple", "set", "frozenset", "dict")
    + ("ndarray", "npscalar", "tensor", "torch")
)
# The roots that hold the arguments' state at exit, where an entry added by the answer may be tolerated.
STATE_ROOTS = frozenset({"args", "kwargs"})
NOTES_MAX = 20


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _removed(what: str, names: list[str]) -> str:
    """What a difference says of entries the arguments held at entry that the reference's call removed."""
    if not names:
        return ""
    return (
        f"the reference removed the {what}(s) {', '.join(names)[:200]} (the arguments held them at entry); "
        "the answer left them"
    )


class _Comparer:
    def __init__(
        self,
        recorded: Value,
        replayed: Value,
        rtol: float,
        atol: float,
        by_dtype: Mapping[str, tuple[float, float]] | None = None,
        entry: AtEntry | None = None,
        notes: list[str] | None = None,
    ) -> None:
        self.recorded, self.replayed = recorded, replayed
        self.rtol, self.atol = rtol, atol
        self.by_dtype = dict(by_dtype or {})
        self.done: set[tuple[int, int]] = set()
        self.entry = entry
        self.notes = notes if notes is not None else []
        self.root = ""  # the root being compared

    def extra(self, path: str, what: str, names: list[str], values: list[Any]) -> tuple[list[str], list[str]]:
        """Of the extra entries NAMES (their replayed VALUES) of a dict (what="key") or an object ("attribute"):
        those that stay a difference, and those the reference removed (the arguments held them at entry); the rest,
        added by the answer, are noted. Only in an argument's state with the call's names at entry, only data (never
        what could stand for a method, never a dunder name); in what the call returned, every one is a difference."""
        if self.entry is None or self.root not in STATE_ROOTS:
            return names, []
        held = self.entry.keys if what == "key" else self.entry.attrs
        differ, removed, added = [], [], []
        for name, node in zip(names, values, strict=True):
            while type(node) is dict and node["t"] == "ref":
                node = self.replayed.targets[node["id"]]
            data = node is None or type(node) in (bool, int, float, str) or node.get("t") in _DATA_TAGS
            if name in held:
                removed.append(name)
            elif not data or what == "attribute" and name.startswith("__") and name.endswith("__"):
                differ.append(name)
            else:
                added.append(name)
        if added and not differ and not removed and len(self.notes) < NOTES_MAX:
            self.notes.append(
                f"at {path}: the answer added the {what}(s) {', '.join(added)[:200]}, which the reference does not "
                "keep and the arguments did not hold at entry"
            )
        return differ, removed

    def compare(self, rec: Any, rep: Any, path: str) -> Difference | None:
        while type(rec) is dict and rec["t"] == "ref":
            rec = self.recorded.targets[rec["id"]]
        while type(rep) is dict and rep["t"] == "ref":
            rep = self.replayed.targets[rep["id"]]
        if type(rec) is dict and type(rep) is dict:
            pair = (id(rec), id(rep))
            if pair in self.done:  # compared already, or being compared further up a cycle
                return None
            self.done.add(pair)
        kind, other = _kind(rec), _kind(rep)
        if kind == "truncated" or other == "truncated":
            if kind == other and rec.get("reason") == rep.get("reason") and rec.get("count") == rep.get("count"):
                return None
            cut = rec if kind == "truncated" else rep
            side = "the recording" if kind == "truncated" else "the replay"
            return Difference(path, "structure", None, None, f"{side} was cut here ({cut['reason']}), the other not")
        if kind != other and "npscalar" in (kind, other):
            found = self.scalars(rec, rep, path, kind, other)
            if found is not False:
                return found
        if kind != other:
            return Difference(path, "type", None, None, f"{_describe(rep)} where the recording has {_describe(rec)}")
        method: Callable[[Any, Any, str], Difference | None] = getattr(self, "kind_" + kind)
        return method(rec, rep, path)

    def value(self, path: str, message: str, abs_error: float | None = None, rel_error: float | None = None):
        return Difference(path, "value", abs_error, rel_error, message)

    def scalars(self, rec: Any, rep: Any, path: str, kind: str, other: str) -> Difference | None | Literal[False]:
        """A numpy scalar and a Python scalar of its kind compared by value as the recording's kind is (False: of
        other kinds, a type difference)."""
        numbers = []
        for node, tag in ((rec, kind), (rep, other)):
            if tag == "npscalar":
                tag = _SCALAR_KIND[node["dtype"]]
                node = decode_array(node["dtype"], node["data"], []).item()
                if tag == "complex":
                    node = {"t": "complex", "re": node.real, "im": node.imag}
            numbers.append((tag, node))
        (tag, a), (other_tag, b) = numbers
        if tag != other_tag:
            return False
        if tag == "float" and kind == "npscalar":  # within the tolerance of the recorded scalar's dtype
            a = FLOAT_STRINGS[a["v"]] if type(a) is dict else a
            b = FLOAT_STRINGS[b["v"]] if type(b) is dict else b
            if a == b or math.isnan(a) and math.isnan(b):
                return None
            return self.close(np.array(a, dtype=np.float64), np.array(b, dtype=np.float64), path, False, rec["dtype"])
        method: Callable[[Any, Any, str], Difference | None] = getattr(self, "kind_" + tag)
        return method(a, b, path)

    def kind_None(self, rec: Any, rep: Any, path: str) -> Difference | None:
        return None

    def kind_bool(self, rec: bool, rep: bool, path: str) -> Difference | None:
        return None if rec is rep else self.value(path, f"{rep} where the recording has {rec}")

    def kind_str(self, rec: str, rep: str, path: str) -> Difference | None:
        return None if rec == rep else self.value(path, f"the str {_short(rep)} where the recording has {_short(rec)}")

    def kind_int(self, rec: Any, rep: Any, path: str) -> Difference | None:
        a = rec["value"] if type(rec) is dict else rec
        b = rep["value"] if type(rep) is dict else rep
        if a == b:
            return None
        error = abs(a - b)
        return self.value(
            path,
            f"{_short(b)} where the recording has {_short(a)}",
            float(error) if error < 2**1000 else math.inf,
            float(error / abs(a)) if a and error < 2**1000 else math.inf,
        )

    def close(self, rec: np.ndarray, rep: np.ndarray, path: str, indexed: bool, dtype: str = "") -> Difference | None:
        """Floating values within tolerance (the tolerance of their stored `dtype` where one is given for it), NaN
        where the recording has NaN (arrays of one shape)."""
        rtol, atol = self.by_dtype.get(dtype, (self.rtol, self.atol))
        with np.errstate(all="ignore"):
            rec_nan, rep_nan = np.isnan(rec), np.isnan(rep)
            equal = (rec == rep) | (rec_nan & rep_nan)
            error = np.where(
                equal, 0.0, np.abs(rep.astype(np.complex128 if np.iscomplexobj(rep) else np.float64) - rec)
            )
            error = np.where(rec_nan != rep_nan, np.inf, error)
            # An infinity matches only itself (its tolerance would be infinite too).
            bad = ~equal & (~(error <= atol + rtol * np.abs(rec)) | np.isinf(rec) | np.isinf(rep))
            if not bad.any():
                return None
            magnitude = np.abs(rec).astype(np.float64)
            relative = np.where(
                magnitude > 0, error / np.where(magnitude > 0, magnitude, 1.0), np.where(error > 0, np.inf, 0.0)
            )
        first = int(np.argmax(bad.reshape(-1)))
        where = np.unravel_index(first, rec.shape) if rec.ndim else ()
        at = f"{path}[{', '.join(str(int(i)) for i in where)}]" if indexed and rec.ndim else path
        count = int(bad.sum())
        largest, largest_rel = float(np.max(error)), float(np.max(relative))
        got, want = rep.reshape(-1)[first], rec.reshape(-1)[first]
        lead = f"{count} of {rec.size} values differ: " if indexed and rec.ndim else ""
        return self.value(
            at,
            f"{lead}{_short(got.item())} where the recording has {_short(want.item())} "
            f"(largest error {largest:.3g} absolute, {largest_rel:.3g} relative; "
            f"atol {atol:g}, rtol {rtol:g}{f' for {dtype}' if dtype in self.by_dtype else ''})",
            largest,
            largest_rel,
        )

    def kind_float(self, rec: Any, rep: Any, path: str) -> Difference | None:
        a = FLOAT_STRINGS[rec["v"]] if type(rec) is dict else rec
        b = FLOAT_STRINGS[rep["v"]] if type(rep) is dict else rep
        if a == b:
            return None
        # A float the recording's value shows to be a float32's takes float32's row where there is one (the
        # reference's value decides, never the replay's).
        dtype = plain_dtype(a) if self.by_dtype else ""
        rtol, atol = self.by_dtype.get(dtype, (self.rtol, self.atol))
        # Both finite and within tolerance: agreed as `close` would agree, without its dozen numpy calls (a
        # recording holds thousands of plain floats); anything else goes to `close`, which names the difference.
        if math.isfinite(a) and math.isfinite(b) and abs(b - a) <= atol + rtol * abs(a):
            return None
        return self.close(np.array(a, dtype=np.float64), np.array(b, dtype=np.float64), path, False, dtype)

    def kind_complex(self, rec: Any, rep: Any, path: str) -> Difference | None:
        def number(node: Any) -> complex:
            part = [FLOAT_STRINGS[x] if type(x) is str else x for x in (node["re"], node["im"])]
            return complex(part[0], part[1])

        recorded = number(rec)
        dtype = plain_dtype(recorded.real, recorded.imag) if self.by_dtype else ""
        return self.close(np.array(recorded), np.array(number(rep)), path, False, dtype)

    def kind_bytes(self, rec: Any, rep: Any, path: str) -> Difference | None:
        if rec["data"] == rep["data"]:
            return None
        at = next((i for i, (x, y) in enumerate(zip(rec["data"], rep["data"], strict=False)) if x != y), None)
        where = f"they differ from byte {at}" if at is not None else "one is a prefix of the other"
        return self.value(path, f"{len(rep['data'])} bytes where the recording has {len(rec['data'])}; {where}")

    kind_bytearray = kind_bytes

    def sequence(self, rec: list[Any], rep: list[Any], path: str, what: str) -> Difference | None:
        if len(rec) != len(rep):
            return Difference(
                path, "structure", None, None, f"{what} of {len(rep)} items, the recording's has {len(rec)}"
            )
        for index, (a, b) in enumerate(zip(rec, rep, strict=True)):
            found = self.compare(a, b, f"{path}[{index}]")
            if found:
                return found
        return None

    def kind_list(self, rec: Any, rep: Any, path: str) -> Difference | None:
        return self.sequence(rec["items"], rep["items"], path, f"a {rec['t']}")

    kind_tuple = kind_set = kind_frozenset = kind_list

    def key_text(self, node: Any, index: int) -> str:
        if type(node) is dict and node["t"] == "ref":
            return f"<ref {self.recorded.paths.get(node['id'], '?')}>"
        if type(node) is dict and node["t"] == "tensor":
            return f"<{'Parameter' if node.get('param') else 'tensor'} {node['dtype']} {node['shape']} #{index}>"
        return _key_text(node) or f"<key #{index}>"

    def kind_dict(self, rec: Any, rep: Any, path: str) -> Difference | None:
        rec_items, rep_items = rec["items"], rep["items"]
        rec_keys, rep_keys = _plain_keys(rec_items), _plain_keys(rep_items)
        if rec_keys is not None and rep_keys is not None:
            # Plain keys: matched by key, in the recording's order (an answer may fill a dict in another order).
            replayed = dict(zip(rep_keys, rep_items, strict=True))
            missing = [key for key in rec_keys if key not in replayed]
            extra = sorted(set(rep_keys) - set(rec_keys))
            extra, removed = self.extra(path, "key", extra, [replayed[key][1] for key in extra]) if extra else ([], [])
            if missing or extra or removed:
                said = "; ".join(
                    part
                    for part in (
                        f"no key {', '.join(missing)[:200]}" if missing else "",
                        f"the key(s) {', '.join(extra)[:200]} the recording has not" if extra else "",
                    )
                    if part
                )
                said = "; ".join(
                    part for part in (f"a dict with {said}" if said else "", _removed("key", removed)) if part
                )
                return Difference(path, "structure", None, None, said)
            for key, pair in zip(rec_keys, rec_items, strict=True):
                found = self.compare(pair[1], replayed[key][1], f"{path}[{key}]")
                if found:
                    return found
            return None
        if len(rec_items) != len(rep_items):
            return Difference(
                path, "structure", None, None, f"a dict of {len(rep_items)} items, the recording's has {len(rec_items)}"
            )
        for index, (a, b) in enumerate(zip(rec_items, rep_items, strict=True)):
            if type(a) is dict or type(b) is dict:  # the truncated node closing a capped dict
                found = self.compare(a, b, f"{path}[<pair #{index}>]")
            else:
                found = self.compare(a[0], b[0], f"{path}<key #{index}>") or self.compare(
                    a[1], b[1], f"{path}[{self.key_text(a[0], index)}]"
                )
            if found:
                return found
        return None

    def named(self, rec: dict[str, Any], rep: dict[str, Any], path: str, what: str) -> Difference | None:
        missing = [name for name in rec if name not in rep]
        extra = [name for name in rep if name not in rec]
        removed: list[str] = []
        if extra and what == "attribute":
            extra, removed = self.extra(path, what, extra, [rep[name] for name in extra])
        if missing or extra or removed:
            said = "; ".join(
                part
                for part in (
                    f"no {what} {', '.join(missing)[:200]}" if missing else "",
                    f"the {what}(s) {', '.join(extra)[:200]} the recording has not" if extra else "",
                    _removed(what, removed),
                )
                if part
            )
            return Difference(path, "structure", None, None, said)
        for name, node in rec.items():
            found = self.compare(node, rep[name], f"{path}.{name}")
            if found:
                return found
        return None

    def same_class(self, rec: Any, rep: Any, path: str) -> Difference | None:
        if rec.get("class") != rep.get("class"):
            return Difference(path, "type", None, None, f"{_describe(rep)} where the recording has {_describe(rec)}")
        if rec.get("cut") != rep.get("cut"):
            return Difference(
                path, "structure", None, None, f"cut at {rep.get('cut')}, the recording at {rec.get('cut')}"
            )
        return None

    def kind_record(self, rec: Any, rep: Any, path: str) -> Difference | None:
        if rec["kind"] != rep["kind"]:
            return Difference(path, "type", None, None, f"a {rep['kind']} where the recording has a {rec['kind']}")
        return self.same_class(rec, rep, path) or self.named(rec["fields"], rep["fields"], path, "field")

    def kind_object(self, rec: Any, rep: Any, path: str) -> Difference | None:
        found = self.same_class(rec, rep, path)
        if found:
            return found
        if rec.get("text") != rep.get("text"):
            return self.value(path, f"{_short(rep.get('text'))} where the recording has {_short(rec.get('text'))}")
        if ("base" in rec) != ("base" in rep):
            return Difference(path, "structure", None, None, "a builtin value in only one of them")
        if "base" in rec:
            found = self.compare(rec["base"], rep["base"], path)
            if found:
                return found
        return self.named(rec.get("attrs", {}), rep.get("attrs", {}), path, "attribute")

    def array(self, rec: Any, rep: Any, path: str) -> Difference | None:
        if rec["dtype"] != rep["dtype"]:
            return Difference(path, "dtype", None, None, f"{_describe(rep)} where the recording has {_describe(rec)}")
        shape = rec.get("shape", [])
        if shape != rep.get("shape", []):
            return Difference(path, "shape", None, None, f"shape {rep['shape']} where the recording has {shape}")
        dtype = rec["dtype"]
        if dtype in ITEM_DTYPES:
            return self.sequence(rec["items"], rep["items"], path, "an array")
        a, b = decode_array(dtype, rec["data"], shape), decode_array(dtype, rep["data"], shape)
        if a.dtype.kind in "fc":
            return self.close(a, b, path, True, dtype)
        if rec["data"] == rep["data"]:
            return None
        differ = a != b
        first = int(np.argmax(differ.reshape(-1)))
        where = np.unravel_index(first, a.shape) if a.ndim else ()
        at = f"{path}[{', '.join(str(int(i)) for i in where)}]" if a.ndim else path
        error = np.abs(b.astype(np.float64) - a.astype(np.float64))
        magnitude = np.abs(a.astype(np.float64))
        with np.errstate(all="ignore"):
            relative = np.where(magnitude > 0, error / np.where(magnitude > 0, magnitude, 1.0), np.inf)
        got, want = b.reshape(-1)[first].item(), a.reshape(-1)[first].item()
        return self.value(
            at,
            f"{int(differ.sum())} of {a.size} values differ: {got} where the recording has {want}",
            float(error.max()),
            float(relative[error > 0].max()),
        )

    def kind_ndarray(self, rec: Any, rep: Any, path: str) -> Difference | None:
        if rec.get("class") != rep.get("class"):
            return Difference(
                path, "type", None, None, f"an array of class {rep.get('class')}, the recording's {rec.get('class')}"
            )
        return self.array(rec, rep, path)

    kind_npscalar = array

    def kind_tensor(self, rec: Any, rep: Any, path: str) -> Difference | None:
        for key, what in (("param", "an nn.Parameter"), ("requires_grad", "requiring grad")):
            if rec.get(key, False) != rep.get(key, False):
                said = "is" if rep.get(key, False) else "is not"
                return Difference(path, "type", None, None, f"a tensor that {said} {what}, unlike the recording's")
        found = self.array(rec, rep, path)
        if found:
            return found
        if ("grad" in rec) != ("grad" in rep):
            return Difference(path + ".grad", "structure", None, None, "a grad in only one of them")
        return self.compare(rec["grad"], rep["grad"], path + ".grad") if "grad" in rec else None

    def kind_torch(self, rec: Any, rep: Any, path: str) -> Difference | None:
        if (rec["kind"], rec["v"]) == (rep["kind"], rep["v"]):
            return None
        return self.value(path, f"{rep['v'][:60]} where the recording has {rec['v'][:60]}")

    def kind_opaque(self, rec: Any, rep: Any, path: str) -> Difference | None:
        found = self.same_class(rec, rep, path)
        if found:
            return found
        for key in ("name", "error"):
            if rec.get(key) != rep.get(key):
                return self.value(path, f"{key} {rep.get(key)} where the recording has {rec.get(key)}")
        return None


def compare(
    recorded: Value,
    replayed: Value,
    *,
    rtol: float,
    atol: float,
    by_dtype: Mapping[str, tuple[float, float]] | None = None,
    entry: AtEntry | None = None,
    notes: list[str] | None = None,
) -> Difference | None:
    """The first difference between a replay and its recording, in the recording's order; None when they agree.
    Floating values within `atol + rtol * |recorded|`; an array or tensor whose dtype `by_dtype` names (e.g.
    "bfloat16") within that dtype's (rtol, atol) instead, and a plain float (complex) whose recorded value is a
    float32's (`plain_dtype`) within the "float32" ("complex64") row where `by_dtype` has one. With the call's
    names at entry (`entry`), a key or attribute the answer added to an argument's state is appended to `notes`
    instead of being a difference (the module's docstring)."""
    for low, high in [(rtol, atol), *(by_dtype or {}).values()]:
        if not (math.isfinite(low) and math.isfinite(high) and low >= 0 and high >= 0):
            raise ValueError("rtol and atol are finite and >= 0")
    missing = [name for name in recorded.roots if name not in replayed.roots]
    extra = [name for name in replayed.roots if name not in recorded.roots]
    if missing or extra:
        return Difference("$", "structure", None, None, f"roots missing {missing}, extra {extra}")
    comparer = _Comparer(recorded, replayed, rtol, atol, by_dtype, entry, notes)
    for name, node in recorded.roots.items():
        comparer.root = name
        try:
            found = comparer.compare(node, replayed.roots[name], name)
        except RecursionError:
            return Difference(name, "structure", None, None, "nested too deeply (through its references) to compare")
        if found:
            return found
    return None
