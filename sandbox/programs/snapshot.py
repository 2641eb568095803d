# The sealed replay's value codec (issue 33): turns what a call returned and its arguments' state into plain data.
# Runs inside the sandbox in the task's own Python (3.11+), standard library only; also importable.

"""Snapshot format, version 1: a JSON document that holds values as data, never as code.

`dumps(snapshot(...))` writes compact ASCII JSON (no NaN literals) of this shape:

    {"v": 1, "roots": {NAME: NODE, ...}}

A NODE is one of:

- JSON null, true/false, a string (a Python str), an integer within +-2**53 (an int), a number with a fraction or
  an exponent (a finite float other than -0.0);
- {"t": "int", "v": "DECIMAL"}: an int outside +-2**53;
- {"t": "float", "v": "nan" | "inf" | "-inf" | "-0.0"};
- {"t": "complex", "re": F, "im": F}, F a float as above (a number or one of those four strings);
- {"t": "bytes", "b64": B64}; {"t": "bytearray", "b64": B64};
- {"t": "list" | "tuple" | "set" | "frozenset", "items": [NODE, ...]}; a set's items are sorted by their encoding;
- {"t": "dict", "items": [[KEY, VALUE], ...]} in the dict's order, keys encoded like values;
- {"t": "record", "class": QUALNAME, "kind": "namedtuple" | "dataclass", "fields": {FIELD: NODE}};
- {"t": "object", "class": QUALNAME, "attrs": {NAME: NODE}, "base": NODE, "text": STR, "cut": REASON}: any other
  object: its instance dict and slots ("attrs"), the builtin value of a subclass of a builtin type ("base", as for
  an OrderedDict or an IntEnum), the fields of a standard-library value type written in C (a datetime's year, ...,
  tzinfo) or its text ("text", as for a Decimal), "cut" when its attributes were capped (a record may have "cut"
  too); only "class" is always there;
- {"t": "ndarray", "dtype": DTYPE, "shape": [N, ...], "b64": B64} for a numpy array of a numeric dtype (raw bytes,
  C order, little-endian), or with "items": [NODE, ...] (flat, C order) and dtype "object", "str" or "bytes";
  "class" when it is a subclass of ndarray;
- {"t": "npscalar", "dtype": DTYPE, "b64": B64}: a numpy scalar of a numeric dtype;
- {"t": "tensor", "dtype": DTYPE, "shape": [N, ...], "b64": B64, "requires_grad": BOOL, "param": true,
  "grad": NODE}: a torch tensor's data as raw bytes (moved to the CPU, detached, contiguous, little-endian; bfloat16
  and float8 as their bits), "param" for an nn.Parameter, "grad" when its .grad is set;
- {"t": "torch", "kind": "Size" | "dtype" | "device", "v": STR};
- {"t": "opaque", "class": QUALNAME, "name": QUALNAME, "error": CLASSNAME}: something held by reference, not by
  value (a function, class, module, generator, file, lock, or a C object with no readable state): its class, the
  qualified name of a function, class or module, and the class of the error when reading it failed;
- {"t": "ref", "id": N}: the same object as the node carrying "id": N (shared references and cycles: every
  container, object, array and tensor node may carry an "id" once something refers to it);
- {"t": "truncated", "reason": "bytes" | "depth" | "items" | "digits", "count": N}: a cap was reached here ("count":
  how many items the capped container had).

DTYPE is one of bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32,
float64, complex64, complex128, float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz.

The names at entry (`entry_names`), what a recording keeps beside each call's outputs so that a replay may keep
an entry the reference never had without a difference, are a second, smaller JSON document:

    {"keys": [TEXT, ...], "attrs": [NAME, ...]}

every plain dict key (`key_text`) and every attribute name of an object node, anywhere in the arguments' trees when
the call began, sorted; null when the walk reached a cap (what lies past it is not known: nothing is tolerated).

Caps: the written document is at most max_bytes long, no container is nested deeper than max_depth, and no
container is read past max_items entries; reaching one writes a truncated node, never raises. The encoder calls no
method of the values it reads: it reads instance dicts and slots through the descriptors of the types that define
them, never `getattr` on an instance, `__repr__`, `__eq__` or `__hash__`; numpy and torch are used only when the
task imported them, found in `sys.modules`.
"""

import _io
import base64
import dataclasses
import json
import sys
import types
from itertools import islice
from typing import Any

VERSION = 1
SAFE_INT = 2**53
INT_DIGITS = 4300  # Python's own default limit on int-to-decimal conversion
DEPTH_LIMIT = 200  # the encoder recurses: a few Python frames per level

# dtype name -> item size in bytes: the raw-bytes dtypes of arrays, numpy scalars and tensors.
DTYPES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
}

_HEAPTYPE = 1 << 9
_mro = type.__dict__["__mro__"].__get__
_type_dict = type.__dict__["__dict__"].__get__
_type_qualname = type.__dict__["__qualname__"].__get__
_type_module = type.__dict__["__module__"].__get__
_type_flags = type.__dict__["__flags__"].__get__
_dict_offset = type.__dict__["__dictoffset__"].__get__
_module_dict: Any = vars(types.ModuleType)["__dict__"].__get__
_complex_real: Any = vars(complex)["real"].__get__
_complex_imag: Any = vars(complex)["imag"].__get__
_basestring = json.encoder.encode_basestring_ascii

# The exact size of every fixed part of a node, as dumps writes it (the overhead a node adds besides its children).
_SIZE = {
    key: len(json.dumps(node, separators=(",", ":")))
    for key, node in {
        "int": {"t": "int", "v": ""},
        "float": {"t": "float", "v": ""},
        "complex": {"t": "complex", "re": None, "im": None},
        "bytes": {"t": "bytearray", "b64": ""},
        "items": {"t": "frozenset", "items": []},
        "record": {"t": "record", "class": "", "kind": "namedtuple", "fields": {}},
        "object": {"t": "object", "class": "", "attrs": {}, "base": None, "text": "", "cut": "digits"},
        "ndarray": {"t": "ndarray", "dtype": "", "shape": [], "b64": "", "class": ""},
        "npscalar": {"t": "npscalar", "dtype": "", "b64": ""},
        "tensor": {"t": "tensor", "dtype": "", "shape": [], "b64": "", "requires_grad": False, "param": True},
        "grad": {"grad": None},
        "torch": {"t": "torch", "kind": "device", "v": ""},
        "opaque": {"t": "opaque", "class": "", "name": "", "error": ""},
        "ref": {"t": "ref", "id": 10**12},
        "id": {"id": 10**12},
        "truncated": {"t": "truncated", "reason": "digits", "count": 10**19},
    }.items()
}


class _Full(Exception):
    """The byte budget is spent: the containers being written stop where they are."""


def _qualname(tp: type) -> str:
    """A class's module and qualified name, read without calling anything the class defines."""
    try:
        module = _type_module(tp)
        name = _type_qualname(tp)
    except Exception:
        return "?"
    if type(name) is not str:
        name = "?"
    return f"{module}.{name}" if type(module) is str and module else name


def _inherits(tp: type, base: object) -> bool:
    return any(cls is base for cls in _mro(tp))  # by identity: a metaclass's __eq__ is never called


def _class_lookup(tp: type, name: str) -> Any:
    """What NAME is in the class dicts of TP's MRO (None when absent), without the metaclass's getattr."""
    for cls in _mro(tp):
        found = _type_dict(cls).get(name)
        if found is not None:
            return found
    return None


def _float_part(x: float) -> float | str:
    """A float as JSON has it, or the string of one JSON has not (nan, inf, -inf, -0.0)."""
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    if x == 0.0 and str(x)[0] == "-":
        return "-0.0"
    return x


def _float_node(x: float) -> Any:
    part = _float_part(x)
    return {"t": "float", "v": part} if type(part) is str else part


_OPAQUE_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.LambdaType,
    types.ModuleType,
    types.GeneratorType,
    types.CoroutineType,
    types.AsyncGeneratorType,
    types.CodeType,
    types.FrameType,
    types.TracebackType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
    type,
    property,
    classmethod,
    staticmethod,
    memoryview,
)


def _name_of(x: Any, tp: type) -> str | None:
    """The qualified name of a function, method, class or module, read through its own type's descriptors."""
    try:
        if _inherits(tp, type):
            return _qualname(x)
        if tp is types.ModuleType:
            name = _module_dict(x).get("__name__")
            return name if type(name) is str else None
        if tp is types.MethodType:
            x, tp = types.MethodType.__dict__["__func__"].__get__(x), types.FunctionType
            if type(x) is not types.FunctionType:
                return None
        if tp in (types.FunctionType, types.BuiltinFunctionType):
            name = tp.__dict__["__qualname__"].__get__(x)
            module = tp.__dict__["__module__"].__get__(x)
            if type(name) is not str:
                return None
            return f"{module}.{name}" if type(module) is str and module else name
    except Exception:
        return None
    return None


class _Encoder:
    def __init__(self, max_bytes: int, max_depth: int, max_items: int, roots: int) -> None:
        if max_depth < 1 or max_depth > DEPTH_LIMIT:
            raise ValueError(f"max_depth must be within 1..{DEPTH_LIMIT}")
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        # Room kept for the truncated nodes that close every open container once the budget is spent.
        reserve = (_SIZE["truncated"] + 1) * (max_depth + roots + 2) + 64
        if max_bytes < 2 * reserve:
            raise ValueError(f"max_bytes must be at least {2 * reserve} for these caps")
        self.budget = max_bytes - reserve
        self.max_depth = max_depth
        self.max_items = max_items
        self.full = False
        self.memo: dict[int, tuple[Any, dict[str, Any]]] = {}
        self.next_id = 0
        np = sys.modules.get("numpy")
        self.np_ndarray = getattr(np, "ndarray", None)
        self.np_generic = getattr(np, "generic", None)
        torch = sys.modules.get("torch")
        self.torch = torch if torch is not None and hasattr(torch, "Tensor") else None

    def spend(self, n: int) -> None:
        if self.full or n > self.budget:
            self.full = True
            raise _Full
        self.budget -= n

    def fits(self, n: int) -> bool:
        """Whether one value of N bytes fits; when not, its truncated node is paid for and the rest go on."""
        if n <= self.budget:
            return True
        self.spend(_SIZE["truncated"] + 1)
        return False

    def truncated(self, reason: str, count: int | None = None) -> dict[str, Any]:
        node: dict[str, Any] = {"t": "truncated", "reason": reason}
        if count is not None:
            node["count"] = count
        return node

    def encode(self, x: Any, depth: int) -> Any:
        """X as a node; a truncated node when a cap is reached, an opaque one when X cannot be read."""
        remembered = len(self.memo)
        try:
            return self._encode(x, depth)
        except BaseException as error:
            # What this value's nodes remembered is not in the document: nothing may refer to it.
            while len(self.memo) > remembered:
                self.memo.popitem()
            if isinstance(error, _Full):
                return self.truncated("bytes")
            if isinstance(error, RecursionError):
                return self.truncated("depth")
            if not isinstance(error, Exception):
                raise
            node = {"t": "opaque", "class": _qualname(type(x)), "error": _qualname(type(error))}
            try:
                self.spend(_SIZE["opaque"] + len(node["class"]) + len(node["error"]))
            except _Full:
                return self.truncated("bytes")
            return node

    def _encode(self, x: Any, depth: int) -> Any:
        tp = type(x)
        if x is None or tp is bool:
            self.spend(6)
            return x
        if tp is int:
            if -SAFE_INT <= x <= SAFE_INT:
                self.spend(len(str(x)) + 1)
                return x
            if x.bit_length() > INT_DIGITS * 3.33:
                self.spend(_SIZE["truncated"] + 1)
                return self.truncated("digits")
            text = str(x)
            self.spend(_SIZE["int"] + len(text) + 1)
            return {"t": "int", "v": text}
        if tp is float:
            self.spend(_SIZE["float"] + 25)
            return _float_node(x)
        if tp is str:
            return self.string(x)
        if tp is complex:
            self.spend(_SIZE["complex"] + 2 * _SIZE["float"] + 50)
            return {"t": "complex", "re": _float_part(x.real), "im": _float_part(x.imag)}
        if tp is bytes:
            return self.raw("bytes", x)
        seen = self.memo.get(id(x))
        if seen is not None:
            return self.ref(seen[1])
        if depth >= self.max_depth:
            self.spend(_SIZE["truncated"] + 1)
            return self.truncated("depth")
        node: dict[str, Any]
        if tp is list or tp is tuple or tp is set or tp is frozenset or tp is dict or tp is bytearray:
            node = {"t": tp.__name__}
            self.remember(x, node)
            return self.builtin(x, tp, node, depth)
        if self.np_ndarray is not None and _inherits(tp, self.np_ndarray):
            return self.ndarray(x, tp, depth)
        if self.np_generic is not None and _inherits(tp, self.np_generic):
            return self.npscalar(x, tp)
        if self.torch is not None:
            torch_node = self.torch_value(x, tp, depth)
            if torch_node is not None:
                return torch_node
        if any(tp is kind for kind in _OPAQUE_TYPES) or _inherits(tp, type) or _inherits(tp, _io._IOBase):
            return self.opaque(x, tp, _name_of(x, tp))
        if _inherits(tp, tuple) and type(_class_lookup(tp, "_fields")) is tuple and _type_flags(tp) & _HEAPTYPE:
            return self.namedtuple(x, tp, depth)
        fields = _class_lookup(tp, "__dataclass_fields__")
        if type(fields) is dict and _type_flags(tp) & _HEAPTYPE:
            return self.dataclass(x, tp, fields, depth)
        return self.instance(x, tp, depth)

    def remember(self, x: Any, node: dict[str, Any]) -> None:
        self.memo[id(x)] = (x, node)  # holding x keeps its id from being reused while we write

    def ref(self, target: dict[str, Any]) -> dict[str, Any]:
        if "id" not in target:
            self.spend(_SIZE["ref"] + _SIZE["id"] + 2)
            target["id"] = self.next_id
            self.next_id += 1
        else:
            self.spend(_SIZE["ref"] + 1)
        return {"t": "ref", "id": target["id"]}

    def string(self, x: str) -> Any:
        if not self.fits(len(x) + 3):  # its escaped form is no shorter
            return self.truncated("bytes")
        self.spend(len(_basestring(x)) + 1)
        return x

    def raw(self, tag: str, data: bytes | bytearray) -> dict[str, Any]:
        if not self.fits(_SIZE["bytes"] + 4 * ((len(data) + 2) // 3) + 1):
            return self.truncated("bytes")
        self.spend(_SIZE["bytes"] + 4 * ((len(data) + 2) // 3) + 1)
        return {"t": tag, "b64": base64.b64encode(data).decode("ascii")}

    def items(self, values: Any, count: int, depth: int) -> list[Any]:
        """The nodes of the first max_items of VALUES (of COUNT), a truncated node closing them when capped."""
        out: list[Any] = []
        for value in islice(values, self.max_items):
            out.append(self.encode(value, depth + 1))
            if self.full:
                return out
        if count > self.max_items:
            try:
                self.spend(_SIZE["truncated"] + 1)
            except _Full:
                pass
            out.append(self.truncated("items", count))
        return out

    def builtin(self, x: Any, tp: Any, node: dict[str, Any], depth: int) -> dict[str, Any]:
        """A builtin container's node (x is of exactly TP, or TP is the builtin base of x's class)."""
        if tp is bytearray:
            node.update(self.raw("bytearray", bytes(bytearray.__iter__(x))))
            return node
        self.spend(_SIZE["items"])
        if tp is dict:
            pairs: list[Any] = []
            count = dict.__len__(x)
            for key, value in islice(dict.items(x), self.max_items):
                self.spend(4)
                pairs.append([self.encode(key, depth + 1), None])
                if self.full:
                    pairs[-1][1] = self.truncated("bytes")
                    break
                pairs[-1][1] = self.encode(value, depth + 1)
                if self.full:
                    break
            else:
                if count > self.max_items:
                    try:
                        self.spend(_SIZE["truncated"] + 1)
                    except _Full:
                        pass
                    pairs.append(self.truncated("items", count))
            node["items"] = pairs
        elif tp is list or tp is tuple:
            node["items"] = self.items(tp.__iter__(x), tp.__len__(x), depth)
        else:
            elements = self.items(tp.__iter__(x), tp.__len__(x), depth)
            if not self.full:
                elements.sort(key=lambda item: json.dumps(item, sort_keys=True, separators=(",", ":")))
            node["items"] = elements
        return node

    def opaque(self, x: Any, tp: type, name: str | None, error: str | None = None) -> dict[str, Any]:
        node: dict[str, Any] = {"t": "opaque", "class": _qualname(tp)}
        if name is not None:
            node["name"] = name[:512]
        if error is not None:
            node["error"] = error
        self.spend(_SIZE["opaque"] + len(_basestring(node["class"])) + len(_basestring(node.get("name", ""))))
        self.remember(x, node)
        return node

    def named(self, x: Any, tp: type, node: dict[str, Any], key: str, names: list[str], values: list[Any], depth: int):
        self.spend(len(_basestring(node["class"])))
        fields: dict[str, Any] = {}
        node[key] = fields
        for name, value in zip(names[: self.max_items], values, strict=False):
            self.spend(len(_basestring(name)) + 2)
            fields[name] = self.encode(value, depth + 1)
            if self.full:
                node["cut"] = "bytes"
                return node
        if len(names) > self.max_items:
            node["cut"] = "items"
        return node

    def namedtuple(self, x: Any, tp: type, depth: int) -> dict[str, Any]:
        node: dict[str, Any] = {"t": "record", "class": _qualname(tp), "kind": "namedtuple"}
        self.spend(_SIZE["record"])
        self.remember(x, node)
        names = [name for name in _class_lookup(tp, "_fields") if type(name) is str]
        return self.named(x, tp, node, "fields", names, list(islice(tuple.__iter__(x), len(names))), depth)

    def dataclass(self, x: Any, tp: type, fields: dict[str, Any], depth: int) -> dict[str, Any]:
        node: dict[str, Any] = {"t": "record", "class": _qualname(tp), "kind": "dataclass"}
        self.spend(_SIZE["record"])
        self.remember(x, node)
        state = self.state(x, tp)
        names = [
            name
            for name, field in fields.items()
            if type(name) is str
            and type(field) is dataclasses.Field
            and field._field_type is dataclasses._FIELD  # type: ignore[attr-defined]
            and name in state
        ]
        return self.named(x, tp, node, "fields", names, [state[name] for name in names], depth)

    def state(self, x: Any, tp: type) -> dict[str, Any]:
        """X's instance dict and filled slots, read through the descriptors of the classes that made them."""
        state: dict[str, Any] = {}
        for cls in reversed(_mro(tp)):
            if cls is object:
                continue
            for name, descriptor in list(_type_dict(cls).items()):
                if type(descriptor) is types.MemberDescriptorType and type(name) is str:
                    try:
                        state[name] = descriptor.__get__(x, cls)
                    except AttributeError:
                        pass
        getter = None
        for cls in _mro(tp):
            candidate = _type_dict(cls).get("__dict__")
            if type(candidate) is types.GetSetDescriptorType:
                getter = candidate
                break
        if getter is None and _dict_offset(tp):
            raise TypeError("an instance dict hidden behind the class's own __dict__")
        if getter is not None:
            instance_dict = getter.__get__(x, tp)
            if type(instance_dict) is dict:
                for name, value in islice(dict.items(instance_dict), self.max_items + 1):
                    if type(name) is not str:
                        raise TypeError("an attribute name that is not a str")
                    state[name] = value
        return state

    def instance(self, x: Any, tp: type, depth: int) -> dict[str, Any]:
        node: dict[str, Any] = {"t": "object", "class": _qualname(tp)}
        self.spend(_SIZE["object"])
        self.remember(x, node)
        base = next((b for b in (dict, list, tuple, set, frozenset, bytearray) if _inherits(tp, b)), None)
        if base is not None:
            self.spend(_SIZE["items"])
            node["base"] = self.builtin(x, base, {"t": base.__name__}, depth)  # at the object's own depth
        else:
            for scalar, read in ((int, int.__int__), (float, float.__float__)):
                if _inherits(tp, scalar):
                    node["base"] = self.encode(read(x), depth + 1)
                    break
            else:
                if _inherits(tp, str):
                    node["base"] = self.string(str.__str__(x))
                elif _inherits(tp, bytes):
                    node["base"] = self.raw("bytes", bytes.__bytes__(x))
                elif _inherits(tp, complex):
                    node["base"] = self.encode(complex(_complex_real(x), _complex_imag(x)), depth + 1)
        if self.full:
            node["cut"] = "bytes"
            return node
        fields: dict[str, Any] = {}
        value_class = next((c for c in _mro(tp) if not _type_flags(c) & _HEAPTYPE and _qualname(c) in _C_VALUES), None)
        if value_class is not None:
            value_fields = _C_VALUES[_qualname(value_class)]
            if not value_fields:
                node["text"] = _type_dict(value_class)["__str__"](x)
                self.spend(len(_basestring(node["text"])))
            for name in value_fields:  # each read through the C class's own descriptor, never a subclass's property
                descriptor = next(_type_dict(c)[name] for c in _mro(value_class) if name in _type_dict(c))
                fields[name] = descriptor.__get__(x, value_class)
        elif "base" not in node and not any(
            "__slots__" in _type_dict(c) or "__dict__" in _type_dict(c) for c in _mro(tp)
        ):
            # A class written in C (a lock, a generator of numbers): its state is not ours to read.
            del self.memo[id(x)]
            return self.opaque(x, tp, None)
        state = {**fields, **self.state(x, tp)}
        if not state and "text" in node:
            return node
        names = list(state)
        return self.named(x, tp, node, "attrs", names, [state[name] for name in names], depth)

    def dtype_name(self, name: str) -> str:
        return name if name in DTYPES else ""

    def ndarray(self, x: Any, tp: type, depth: int) -> dict[str, Any]:
        np = sys.modules["numpy"]
        array = np.ndarray.view(x, np.ndarray)
        node: dict[str, Any] = {"t": "ndarray"}
        if tp is not np.ndarray:
            node["class"] = _qualname(tp)
        shape = [int(n) for n in array.shape]
        kind = array.dtype.kind
        self.spend(_SIZE["ndarray"] + len(str(shape)) + len(node.get("class", "")))
        self.remember(x, node)
        name = self.dtype_name(array.dtype.name)
        if name and not array.dtype.fields:
            node.update(dtype=name, shape=shape)
            if not self.fits(len(name) + 4 * ((array.nbytes + 2) // 3)):  # before any copy
                del self.memo[id(x)]
                return self.truncated("bytes")
            data = np.ascontiguousarray(array.astype(array.dtype.newbyteorder("<"), copy=False))
            node["b64"] = base64.b64encode(data.tobytes()).decode("ascii")
            return node
        if kind in "OUS":
            node.update(dtype={"O": "object", "U": "str", "S": "bytes"}[kind], shape=shape)
            flat = array.reshape(-1)
            node["items"] = self.items(
                (flat[i].item() if kind != "O" else flat[i] for i in range(flat.size)), flat.size, depth
            )
            return node
        del self.memo[id(x)]
        return self.opaque(x, tp, None, f"dtype {array.dtype.str}")

    def npscalar(self, x: Any, tp: type) -> dict[str, Any]:
        np = sys.modules["numpy"]
        array = np.asarray(x)
        name = self.dtype_name(array.dtype.name)
        if not name:
            return self.instance(x, tp, 0) if array.dtype.kind in "US" else self.opaque(x, tp, None)
        self.spend(_SIZE["npscalar"] + len(name) + 4 * ((array.nbytes + 2) // 3))
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        return {"t": "npscalar", "dtype": name, "b64": base64.b64encode(data).decode("ascii")}

    def torch_value(self, x: Any, tp: type, depth: int) -> dict[str, Any] | None:
        torch = self.torch
        assert torch is not None
        if _inherits(tp, torch.Tensor):
            return self.tensor(x, tp, depth)
        for kind, cls in (("Size", torch.Size), ("dtype", torch.dtype), ("device", torch.device)):
            if tp is cls:
                text = f"torch.Size({list(tuple.__iter__(x))})" if kind == "Size" else str(x)
                self.spend(_SIZE["torch"] + len(text))
                return {"t": "torch", "kind": kind, "v": text}
        return None

    def tensor(self, x: Any, tp: type, depth: int) -> dict[str, Any]:
        torch = self.torch
        assert torch is not None
        with torch._C.DisableTorchFunctionSubclass():
            name = str(x.dtype).removeprefix("torch.")
            if name not in DTYPES or x.layout != torch.strided or x.is_quantized or x.device.type == "meta":
                return self.opaque(x, tp, None, f"tensor {name} {x.layout}")
            shape = [int(n) for n in x.shape]
            nbytes = x.numel() * DTYPES[name]
            node: dict[str, Any] = {"t": "tensor", "dtype": name, "shape": shape}
            if not self.fits(_SIZE["tensor"] + len(name) + len(str(shape)) + 4 * ((nbytes + 2) // 3)):
                return self.truncated("bytes")
            self.spend(_SIZE["tensor"] + len(name) + len(str(shape)) + 4 * ((nbytes + 2) // 3))
            self.remember(x, node)
            flat = x.detach().to("cpu").contiguous().reshape(-1)
            raw = flat.view(torch.uint8)
            if sys.modules.get("numpy") is not None:
                data = raw.numpy().tobytes()
            else:
                data = bytes(raw.clone().untyped_storage())
            node["b64"] = base64.b64encode(data[:nbytes]).decode("ascii")
            node["requires_grad"] = bool(x.requires_grad)
            if _inherits(tp, torch.nn.Parameter):
                node["param"] = True
            grad = x.grad if x.is_leaf else None
        if grad is not None:
            self.spend(_SIZE["grad"])
            node["grad"] = self.encode(grad, depth + 1)
        return node


# Standard-library value types written in C: the fields that hold their value, read through the C class's own
# descriptors (a datetime's tzinfo is a value of its own), or () for those whose text is their value.
_C_VALUES: dict[str, tuple[str, ...]] = {
    "decimal.Decimal": (),
    "datetime.timezone": (),
    "datetime.date": ("year", "month", "day"),
    "datetime.datetime": ("year", "month", "day", "hour", "minute", "second", "microsecond", "tzinfo", "fold"),
    "datetime.time": ("hour", "minute", "second", "microsecond", "tzinfo", "fold"),
    "datetime.timedelta": ("days", "seconds", "microseconds"),
    "builtins.range": ("start", "stop", "step"),
    "builtins.slice": ("start", "stop", "step"),
}


def snapshot_roots(roots: dict[str, Any], *, max_bytes: int, max_depth: int, max_items: int) -> dict[str, Any]:
    """The snapshot document of several named values that may share objects (a call's return and its arguments)."""
    return _document(roots, _Encoder, max_bytes, max_depth, max_items)


def _document(roots: dict[str, Any], encoder_class: type, max_bytes: int, max_depth: int, max_items: int):
    if any(type(name) is not str or not 0 < len(name) <= 200 for name in roots) or not 0 < len(roots) <= 64:
        raise ValueError("a snapshot has 1 to 64 roots, named by str of 1 to 200 characters")
    roots_size = sum(len(_basestring(name)) + 2 for name in roots)
    encoder = encoder_class(max_bytes - roots_size, max_depth, max_items, len(roots))
    out: dict[str, Any] = {}
    for name, value in roots.items():
        out[name] = encoder.encode(value, 0) if not encoder.full else encoder.truncated("bytes")
    return {"v": VERSION, "roots": out}


def key_text(node: Any) -> str | None:
    """How a dict key reads in a path and in the names at entry, when it is a plain value (None, a bool, an int, a
    str, or a tuple of those); None for any other key."""
    if node is None or type(node) in (bool, int):
        return repr(node)
    if type(node) is str:
        return json.dumps(node)
    if type(node) is dict and node.get("t") == "int":
        return str(node["v"])
    if type(node) is dict and node.get("t") == "tuple" and type(node.get("items")) is list:
        parts = [key_text(item) for item in node["items"]]
        if all(part is not None for part in parts):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
    return None


class _Names(_Encoder):
    """The encoder `entry_names` walks with: it writes no numbers' bytes (an array, a tensor, bytes hold no keys)."""

    def raw(self, tag: str, data: bytes | bytearray) -> dict[str, Any]:
        self.spend(_SIZE["bytes"])
        return {"t": tag, "b64": ""}

    def ndarray(self, x: Any, tp: type, depth: int) -> dict[str, Any]:
        np = sys.modules["numpy"]
        if np.ndarray.view(x, np.ndarray).dtype.kind != "O":  # only an object array can hold a dict
            self.spend(_SIZE["opaque"])
            return {"t": "opaque", "class": "ndarray"}
        return super().ndarray(x, tp, depth)

    def npscalar(self, x: Any, tp: type) -> dict[str, Any]:
        self.spend(_SIZE["opaque"])
        return {"t": "opaque", "class": "npscalar"}

    def tensor(self, x: Any, tp: type, depth: int) -> dict[str, Any]:
        self.spend(_SIZE["opaque"])
        return {"t": "opaque", "class": "tensor"}


def entry_names(roots: dict[str, Any], *, max_bytes: int, max_depth: int, max_items: int) -> dict[str, Any] | None:
    """The names at entry of a call's arguments (ROOTS as `snapshot_roots` takes them): every plain dict key's text
    and every attribute name, read as the snapshot reads them (no method of the values called); None when a cap was
    reached (a key past it would be unknown)."""
    document = _document(roots, _Names, max_bytes, max_depth, max_items)
    keys: set[str] = set()
    attrs: set[str] = set()
    pending: list[Any] = list(document["roots"].values())
    while pending:
        node = pending.pop()
        if type(node) is not dict:
            continue
        tag = node.get("t")
        if tag == "truncated" or "cut" in node or tag == "opaque" and "error" in node:  # unread: its names unknown
            return None
        if tag == "dict":
            for pair in node["items"]:
                if type(pair) is not list:  # a truncated node closing the dict
                    return None
                text = key_text(pair[0])
                if text is not None:
                    keys.add(text)
                pending.extend(pair)
        elif tag in ("list", "tuple", "set", "frozenset", "ndarray"):
            pending.extend(node.get("items", ()))
        elif tag == "object":
            attrs.update(node.get("attrs", {}))
            pending.extend(node.get("attrs", {}).values())
            pending.append(node.get("base"))
        elif tag == "record":
            pending.extend(node["fields"].values())
    return {"keys": sorted(keys), "attrs": sorted(attrs)}


def snapshot(value: Any, *, max_bytes: int, max_depth: int, max_items: int) -> dict[str, Any]:
    """The snapshot document of VALUE, as the one root "value"."""
    return snapshot_roots({"value": value}, max_bytes=max_bytes, max_depth=max_depth, max_items=max_items)


def dumps(obj: dict[str, Any]) -> bytes:
    """A snapshot document as compact ASCII JSON."""
    if type(obj) is not dict or obj.get("v") != VERSION:
        raise ValueError("not a snapshot document")
    return json.dumps(obj, separators=(",", ":"), allow_nan=False, ensure_ascii=True).encode("ascii")
