"""The sealed replay's snapshot (sandbox/programs/snapshot.py): every kind of value comes back as what it
was, shared objects once, and hostile objects within the caps without running their code."""

from __future__ import annotations

import ast
import base64
import collections
import dataclasses
import datetime
import decimal
import enum
import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.judging import compare as judging
from evaluation.judging.compare import compare, decode_array, parse
from sandbox import programs
from sandbox.programs import snapshot as snap

CAPS = {"max_bytes": 4 << 20, "max_depth": 40, "max_items": 10_000}


def doc(value: Any, **caps: int) -> dict[str, Any]:
    return snap.snapshot(value, **{**CAPS, **caps})


def round_trip(value: Any, **caps: int) -> Any:
    """VALUE through the sandbox's encoder, the bytes, the worker's parser, rebuilt as Python values."""
    data = snap.dumps(doc(value, **caps))
    parsed = parse(data, max_bytes=CAPS["max_bytes"], max_depth=caps.get("max_depth", CAPS["max_depth"]))
    return rebuild(parsed.roots["value"], parsed, {})


def rebuild(node: Any, value: judging.Value, seen: dict[int, Any]) -> Any:
    """The Python value a parsed node stands for (what a decoder would give), for checking round trips."""
    if type(node) is not dict:
        return node
    tag = node["t"]
    if tag == "ref":
        return seen[node["id"]]
    if tag == "int":
        return node["value"]
    if tag == "float":
        return judging.FLOAT_STRINGS[node["v"]]
    if tag == "complex":
        return complex(*(judging.FLOAT_STRINGS[x] if type(x) is str else x for x in (node["re"], node["im"])))
    if tag in ("bytes", "bytearray"):
        return node["data"] if tag == "bytes" else bytearray(node["data"])
    if tag == "list":
        out: Any = []
        seen[node.get("id", -1)] = out
        out.extend(rebuild(item, value, seen) for item in node["items"])
        return out
    if tag in ("tuple", "set", "frozenset"):
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](rebuild(i, value, seen) for i in node["items"])
    if tag == "dict":
        out = {}
        seen[node.get("id", -1)] = out
        for key, item in node["items"]:
            out[rebuild(key, value, seen)] = rebuild(item, value, seen)
        return out
    if tag in ("ndarray", "npscalar"):
        if "items" in node:
            return ("ndarray", node["dtype"], node["shape"], [rebuild(i, value, seen) for i in node["items"]])
        return ("ndarray", node["dtype"], decode_array(node["dtype"], node["data"], node.get("shape", [])).tolist())
    if tag == "tensor":
        data = decode_array(node["dtype"], node["data"], node["shape"]).tolist()
        grad = rebuild(node["grad"], value, seen) if "grad" in node else None
        return ("tensor", node["dtype"], data, node["requires_grad"], node.get("param", False), grad)
    return node


def same(a: Any, b: Any) -> bool:
    """Equality that tells -0.0 from 0.0 and holds NaN equal to NaN."""
    if type(a) is float and type(b) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) is complex and type(b) is complex:
        return same(a.real, b.real) and same(a.imag, b.imag)
    if type(a) in (list, tuple) and type(b) is type(a):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict and type(b) is dict:
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_the_module_is_one_sandbox_program_of_the_standard_library():
    source = programs.source("snapshot")
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert imported <= set(sys.stdlib_module_names)  # so neither numpy, torch nor anything of ours
    # It runs as a program (the sandbox may prepend lines to it) in a Python that has neither numpy nor torch.
    program = (
        source
        + "\nimport sys\nsys.stdout.buffer.write(dumps(snapshot([1, 2.5], max_bytes=4096, max_depth=8, max_items=8)))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, check=True, timeout=60)
    assert json.loads(out.stdout) == {"v": 1, "roots": {"value": {"t": "list", "items": [1, 2.5]}}}
    code = "import sys; sys.modules['numpy'] = None; sys.modules['torch'] = None\n" + program
    assert subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, timeout=60).returncode == 0


def test_the_dtype_tables_of_both_sides_agree():
    assert snap.DTYPES == judging.DTYPES


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -(2**53),
        2**53,
        2**53 + 1,
        -(2**200) - 7,
        1.5,
        -1e-310,
        1e308,
        math.inf,
        -math.inf,
        -0.0,
        0.0,
        complex(1.5, -0.0),
        complex(math.inf, math.nan),
        "",
        "snowman \u2603, a lone surrogate \ud800, an astral \U0001f600",
        b"",
        b"\x00\xff" * 100,
        bytearray(b"abc"),
        [],
        [1, [2, [3, []]]],
        (1, "a", (None,)),
        {3, 1, 2},
        frozenset({"b", "a"}),
        {"a": 1, 2: "b", (1, 2): [3], None: 4.5, 2**60: 1},
    ],
    # A set's repr follows string hashing, which differs per process: ids from it differed between xdist workers.
    ids=lambda value: repr(sorted(value, key=repr) if isinstance(value, set | frozenset) else value),
)
def test_builtin_values_come_back_as_they_were(value):
    assert same(round_trip(value), value)


def test_nan_comes_back_as_nan():
    assert math.isnan(round_trip(math.nan))


def test_a_set_is_written_in_one_order_whatever_its_iteration_order():
    # Two equal sets built in different orders iterate differently; their snapshots are the same bytes.
    first, second = set(), set()
    for i in range(200):
        first.add(f"k{i}")
    for i in reversed(range(200)):
        second.add(f"k{i}")
    assert list(first) != list(second)
    assert snap.dumps(doc(first)) == snap.dumps(doc(second))


class Point(NamedTuple):
    x: int
    y: float


@dataclasses.dataclass
class Config:
    name: str
    sizes: list[int]
    scale: float = 1.0


@dataclasses.dataclass(slots=True)
class Slotted:
    a: int
    b: str


class Color(enum.IntEnum):
    RED = 1


class Plain:
    def __init__(self) -> None:
        self.weights = [1.0, 2.0]
        self._private = {"k": (1, 2)}


class WithSlots:
    __slots__ = ("filled", "empty")

    def __init__(self) -> None:
        self.filled = 3


def test_records_and_objects_come_back_as_class_name_and_fields():
    value = doc([Point(1, 2.5), Config("c", [1, 2]), Slotted(1, "x"), Plain(), WithSlots(), Color.RED])
    items = value["roots"]["value"]["items"]
    here = __name__
    assert items[0] == {"t": "record", "class": f"{here}.Point", "kind": "namedtuple", "fields": {"x": 1, "y": 2.5}}
    assert items[1]["class"] == f"{here}.Config" and items[1]["kind"] == "dataclass"
    assert items[1]["fields"] == {"name": "c", "sizes": {"t": "list", "items": [1, 2]}, "scale": 1.0}
    assert items[2]["fields"] == {"a": 1, "b": "x"}
    assert items[3] == {
        "t": "object",
        "class": f"{here}.Plain",
        "attrs": {
            "weights": {"t": "list", "items": [1.0, 2.0]},
            "_private": {"t": "dict", "items": [["k", {"t": "tuple", "items": [1, 2]}]]},
        },
    }
    assert items[4] == {"t": "object", "class": f"{here}.WithSlots", "attrs": {"filled": 3}}
    assert items[5]["class"] == f"{here}.Color" and items[5]["base"] == 1 and items[5]["attrs"]["_name_"] == "RED"
    parse(snap.dumps(value), max_bytes=1 << 20, max_depth=40)


def test_standard_value_types_subclasses_and_references_by_name():
    value = doc(
        [
            decimal.Decimal("1.10"),
            datetime.date(2024, 2, 29),
            collections.OrderedDict(a=1),
            collections.defaultdict(list, b=[2]),
            len,
            math.sqrt,
            Plain,
            json,
            Plain().__init__,
            (i for i in range(3)),
            threading.Lock(),
            open(__file__),  # noqa: SIM115 - the value is the open file itself
        ]
    )
    items = value["roots"]["value"]["items"]
    assert items[0] == {"t": "object", "class": "decimal.Decimal", "text": "1.10"}
    assert items[1] == {"t": "object", "class": "datetime.date", "attrs": {"year": 2024, "month": 2, "day": 29}}
    assert items[2]["class"] == "collections.OrderedDict" and items[2]["base"] == {"t": "dict", "items": [["a", 1]]}
    assert items[3]["base"]["items"] == [["b", {"t": "list", "items": [2]}]]
    assert items[3]["attrs"]["default_factory"] == {"t": "opaque", "class": "builtins.type", "name": "builtins.list"}
    assert items[4] == {"t": "opaque", "class": "builtins.builtin_function_or_method", "name": "builtins.len"}
    assert items[5]["name"] == "math.sqrt"
    assert items[6] == {"t": "opaque", "class": "builtins.type", "name": f"{__name__}.Plain"}
    assert items[7] == {"t": "opaque", "class": "builtins.module", "name": "json"}
    assert items[8]["name"] == f"{__name__}.Plain.__init__"
    assert [items[i]["t"] for i in (9, 10, 11)] == ["opaque"] * 3
    assert items[11]["class"] == "_io.TextIOWrapper"
    parse(snap.dumps(value), max_bytes=1 << 20, max_depth=40)


class Stamp(datetime.datetime):
    @property
    def year(self) -> int:  # type: ignore[override]
        raise RuntimeError("year")


class HostileZone(datetime.tzinfo):
    def utcoffset(self, dt: Any) -> Any:
        raise RuntimeError("utcoffset")


class Money(decimal.Decimal):
    def __str__(self) -> str:
        raise RuntimeError("str")


def test_value_types_written_in_c_keep_their_value_in_subclasses_without_their_code():
    zone = HostileZone()
    with pytest.raises(RuntimeError):
        str(datetime.datetime(2024, 1, 1, tzinfo=zone))  # with no guard, its text asks the zone
    stamp = Stamp(2024, 5, 6, 7, 8, 9, tzinfo=zone)
    with pytest.raises(RuntimeError):
        stamp.year  # noqa: B018
    node = doc([stamp, Money("2.50"), datetime.timedelta(days=1, seconds=2)])["roots"]["value"]["items"]
    assert node[0]["class"] == f"{__name__}.Stamp"
    assert node[0]["attrs"]["year"] == 2024 and node[0]["attrs"]["second"] == 9
    assert node[0]["attrs"]["tzinfo"] == {"t": "object", "class": f"{__name__}.HostileZone", "attrs": {}}
    assert node[1] == {"t": "object", "class": f"{__name__}.Money", "text": "2.50"}
    assert node[2]["attrs"] == {"days": 1, "seconds": 2, "microseconds": 0}
    assert diff_of(datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)).path == "value.day"
    assert diff_of(Money("1.0"), Money("1.00")).kind == "value"


def diff_of(recorded: Any, replayed: Any) -> Any:
    first, second = (parse(snap.dumps(doc(v)), max_bytes=1 << 20, max_depth=40) for v in (recorded, replayed))
    return compare(first, second, rtol=0, atol=0)


def test_shared_objects_and_cycles_are_written_once():
    shared = [1.0, 2.0]
    cycle: list[Any] = ["head"]
    cycle.append(cycle)
    value = doc({"a": shared, "b": shared, "c": cycle})
    pairs = value["roots"]["value"]["items"]
    assert pairs[0][1] == {"t": "list", "items": [1.0, 2.0], "id": 0}
    assert pairs[1][1] == {"t": "ref", "id": 0}
    assert pairs[2][1] == {"t": "list", "items": ["head", {"t": "ref", "id": 1}], "id": 1}
    parsed = parse(snap.dumps(value), max_bytes=1 << 20, max_depth=40)
    rebuilt = rebuild(parsed.roots["value"], parsed, {})
    assert rebuilt["a"] is rebuilt["b"] and rebuilt["c"][1] is rebuilt["c"]
    assert parsed.paths == {0: 'value["a"]', 1: 'value["c"]'}


def test_a_dag_whose_paths_grow_exponentially_stays_small():
    node: list[Any] = []
    for _ in range(100):
        node = [node, node]  # 2**100 paths, 101 objects
    started = time.perf_counter()
    data = snap.dumps(doc(node, max_depth=150))
    assert len(data) < 10_000 and time.perf_counter() - started < 5
    assert compare(*(parse(data, max_bytes=1 << 20, max_depth=150),) * 2, rtol=0, atol=0) is None


def test_numpy_arrays_and_scalars_keep_dtype_shape_and_bits():
    big_endian = np.arange(6, dtype=">i4").reshape(2, 3)
    strided = np.arange(20, dtype=np.float64).reshape(4, 5)[::2, 1::2]
    cases = [
        np.array([[1.5, -0.0], [np.nan, np.inf]], dtype=np.float32),
        np.arange(12, dtype=np.float16).reshape(3, 4),
        np.array([1 + 2j], dtype=np.complex64),
        np.array([True, False]),
        np.array([], dtype=np.uint64),
        np.array(7, dtype=np.int8),
        big_endian,
        strided,
    ]
    for array in cases:
        node = doc(array)["roots"]["value"]
        assert node["dtype"] == array.dtype.name and node["shape"] == list(array.shape)
        raw = base64.b64decode(node["b64"])
        assert raw == np.ascontiguousarray(array.astype(array.dtype.newbyteorder("<"))).tobytes()
        kind, dtype, data = round_trip(array)
        assert (kind, dtype) == ("ndarray", array.dtype.name)
        assert np.array_equal(np.array(data), array, equal_nan=True)
    assert round_trip(np.float64(2.5)) == ("ndarray", "float64", 2.5)
    assert round_trip(np.int64(-3)) == ("ndarray", "int64", -3)
    assert round_trip(np.array(["ab", "c"])) == ("ndarray", "str", [2], ["ab", "c"])
    assert round_trip(np.array([1, None, "x"], dtype=object)) == ("ndarray", "object", [3], [1, None, "x"])


def test_a_numpy_scalar_is_not_taken_for_the_float_it_subclasses():
    assert doc(np.float64(1.0))["roots"]["value"]["t"] == "npscalar"


class Hostile:
    """Every method an encoder might call raises, loops or sleeps."""

    calls: list[str] = []

    def __init__(self) -> None:
        self.data = [1, 2]

    def __getattr__(self, name: str) -> Any:
        Hostile.calls.append("getattr")
        raise RuntimeError("getattr")

    def __getattribute__(self, name: str) -> Any:
        if name != "data" and not name.startswith("__"):
            Hostile.calls.append("getattribute")
        return object.__getattribute__(self, name)

    def __repr__(self) -> str:
        Hostile.calls.append("repr")
        while True:
            pass

    def __eq__(self, other: object) -> bool:
        Hostile.calls.append("eq")
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        Hostile.calls.append("hash")
        raise RuntimeError("hash")

    @property
    def slow(self) -> int:
        Hostile.calls.append("property")
        time.sleep(3)
        return 1


def test_a_hostile_object_runs_none_of_its_code():
    hostile = Hostile()
    # With no guard, reading it the usual ways runs its code: getattr, == and hash raise, the property blocks.
    with pytest.raises(RuntimeError):
        hostile.missing  # noqa: B018
    with pytest.raises(RuntimeError):
        assert hostile in [1]
    with pytest.raises(RuntimeError):
        assert {hostile}
    reader = threading.Thread(target=lambda: hostile.slow, daemon=True)
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()
    Hostile.calls.clear()

    started = time.perf_counter()
    value = doc({"key": hostile, "in a set": frozenset(), "twice": [hostile, hostile]})
    assert time.perf_counter() - started < 2  # the property sleeps 3 s
    assert Hostile.calls == []
    pairs = value["roots"]["value"]["items"]
    assert pairs[0][1] == {
        "t": "object",
        "class": f"{__name__}.Hostile",
        "attrs": {"data": {"t": "list", "items": [1, 2]}},
        "id": 0,
    }
    assert pairs[2][1]["items"] == [{"t": "ref", "id": 0}, {"t": "ref", "id": 0}]


class HiddenDict:
    def __init__(self) -> None:
        self.secret = 1

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        raise RuntimeError("__dict__")


def test_an_instance_dict_behind_a_property_is_opaque_not_read_through_it():
    with pytest.raises(RuntimeError):
        vars(HiddenDict())
    assert doc(HiddenDict())["roots"]["value"] == {
        "t": "opaque",
        "class": f"{__name__}.HiddenDict",
        "error": "builtins.TypeError",
    }


class Meta(type):
    def __eq__(cls, other: object) -> bool:
        raise RuntimeError("metaclass eq")

    def __hash__(cls) -> int:
        raise RuntimeError("metaclass hash")

    def __getattribute__(cls, name: str) -> Any:
        raise RuntimeError("metaclass getattribute")


class FromMeta(metaclass=Meta):
    pass


def test_a_class_with_a_hostile_metaclass_is_read_without_it():
    instance = object.__new__(FromMeta)
    with pytest.raises(RuntimeError):
        FromMeta.__mro__  # noqa: B018
    with pytest.raises(RuntimeError):
        assert type(instance) in (int, str)
    node = doc([instance, FromMeta])["roots"]["value"]["items"]
    assert node[0] == {"t": "object", "class": f"{__name__}.FromMeta", "attrs": {}}
    assert node[1] == {"t": "opaque", "class": f"{__name__}.Meta", "name": f"{__name__}.FromMeta"}


class BadDictKey:
    pass


def test_an_attribute_dict_with_a_key_that_is_not_a_str_is_opaque_with_the_error():
    weird = BadDictKey()
    weird.__dict__[5] = "five"
    assert doc(weird)["roots"]["value"] == {
        "t": "opaque",
        "class": f"{__name__}.BadDictKey",
        "error": "builtins.TypeError",
    }


def test_a_ten_million_item_list_is_capped_at_max_items_and_fast():
    huge = list(range(10**7))
    started = time.perf_counter()
    value = doc(huge, max_items=1000)
    assert time.perf_counter() - started < 2  # reading every item takes longer
    items = value["roots"]["value"]["items"]
    assert items[:1000] == list(range(1000)) and items[1000] == {"t": "truncated", "reason": "items", "count": 10**7}
    assert len(items) == 1001


def test_nesting_past_max_depth_is_a_truncated_node():
    deep: list[Any] = []
    inner = deep
    for _ in range(10_000):
        inner.append([])
        inner = inner[0]
    node = doc(deep, max_depth=5)["roots"]["value"]
    for _ in range(5):
        node = node["items"][0]
    assert node == {"t": "truncated", "reason": "depth"}
    parse(snap.dumps(doc(deep, max_depth=5)), max_bytes=1 << 20, max_depth=5)


def test_the_byte_cap_holds_and_cuts_where_it_was_reached():
    value = {"small": 1, "text": "x" * 100_000, "after": list(range(100_000)), "tail": 2}
    data = snap.dumps(doc(value, max_bytes=20_000))
    assert len(data) <= 20_000
    pairs = json.loads(data)["roots"]["value"]["items"]
    assert pairs[1] == ["text", {"t": "truncated", "reason": "bytes"}]  # too big alone: the rest goes on
    assert pairs[2][1]["items"][-1] == {"t": "truncated", "reason": "bytes"}
    assert len(pairs) == 3  # the budget was spent inside "after": the dict stops there
    parse(data, max_bytes=20_000, max_depth=40)


def test_a_huge_int_is_truncated_not_converted():
    assert doc(10**5000)["roots"]["value"] == {"t": "truncated", "reason": "digits"}


def test_caps_too_small_to_hold_a_document_are_a_caller_error():
    with pytest.raises(ValueError, match="max_bytes"):
        snap.snapshot(1, max_bytes=100, max_depth=10, max_items=10)
    with pytest.raises(ValueError, match="max_depth"):
        snap.snapshot(1, max_bytes=1 << 20, max_depth=10_000, max_items=10)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
hashables = st.recursive(scalars.filter(lambda x: x == x), lambda inner: st.tuples(inner, inner), max_leaves=4)
values = st.recursive(
    scalars | st.complex_numbers(allow_nan=False),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.frozensets(st.integers() | st.text(max_size=5), max_size=5)
    ),
    max_leaves=30,
)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(values)
def test_any_plain_value_round_trips(value):
    rebuilt = round_trip(value)
    if isinstance(value, frozenset):
        assert rebuilt == value
    else:
        assert same(rebuilt, value) or _has_frozenset(value)


def _has_frozenset(value: Any) -> bool:
    if isinstance(value, frozenset):
        return True
    if isinstance(value, list | tuple):
        return any(_has_frozenset(x) for x in value)
    if isinstance(value, dict):
        return any(_has_frozenset(x) for x in value.values())
    return False


@settings(derandomize=True, max_examples=100, deadline=None)
@given(values, st.integers(min_value=2_000, max_value=6_000), st.integers(1, 8), st.integers(1, 6))
def test_any_value_under_any_caps_fits_them_and_parses(value, max_bytes, max_depth, max_items):
    data = snap.dumps(snap.snapshot([value, value], max_bytes=max_bytes, max_depth=max_depth, max_items=max_items))
    assert len(data) <= max_bytes
    parsed = parse(data, max_bytes=max_bytes, max_depth=max_depth)
    assert compare(parsed, parsed, rtol=0, atol=0) is None


def test_a_float_change_anywhere_is_seen_at_its_path():
    recorded = {"layers": [{"w": [0.5, 1.5]}, {"w": [2.5]}]}
    replayed = {"layers": [{"w": [0.5, 1.5]}, {"w": [2.5000001]}]}
    found = compare(
        parse(snap.dumps(doc(recorded)), max_bytes=1 << 20, max_depth=40),
        parse(snap.dumps(doc(replayed)), max_bytes=1 << 20, max_depth=40),
        rtol=0,
        atol=0,
    )
    assert found is not None and found.path == 'value["layers"][1]["w"][0]' and found.kind == "value"


def _torch() -> Any:
    return pytest.importorskip("torch")


def test_a_tensor_keeps_dtype_shape_bits_grad_and_parameter_flag():
    torch = _torch()
    generator = torch.Generator().manual_seed(0)
    cases = {
        "float32": torch.randn(3, 4, generator=generator),
        "bfloat16": torch.randn(2, 5, generator=generator).to(torch.bfloat16),
        "float16": torch.randn(4, generator=generator).half(),
        "float64": torch.tensor(2.5, dtype=torch.float64),
        "int64": torch.arange(6).reshape(2, 3).t(),  # not contiguous
        "bool": torch.tensor([True, False]),
        "complex64": torch.tensor([1 + 2j], dtype=torch.complex64),
        "float8_e4m3fn": torch.tensor([0.5, -2.0, 448.0], dtype=torch.float8_e4m3fn),
        "float8_e5m2": torch.tensor([0.5, -2.0, 1.0], dtype=torch.float8_e5m2),
    }
    for name, tensor in cases.items():
        kind, dtype, data, requires_grad, param, grad = round_trip(tensor)
        assert (kind, dtype, requires_grad, param, grad) == ("tensor", name, False, False, None)
        assert torch.equal(torch.tensor(data, dtype=tensor.dtype), tensor), name
    parameter = torch.nn.Parameter(torch.ones(2, 2))
    parameter.sum().backward()
    kind, dtype, data, requires_grad, param, grad = round_trip(parameter)
    assert (requires_grad, param, data) == (True, True, [[1.0, 1.0], [1.0, 1.0]])
    assert grad == ("tensor", "float32", [[1.0, 1.0], [1.0, 1.0]], False, False, None)
    misc = doc([torch.Size([2, 3]), torch.bfloat16, torch.device("cpu")])["roots"]["value"]["items"]
    assert misc == [
        {"t": "torch", "kind": "Size", "v": "torch.Size([2, 3])"},
        {"t": "torch", "kind": "dtype", "v": "torch.bfloat16"},
        {"t": "torch", "kind": "device", "v": "cpu"},
    ]


def test_a_tensor_subclass_with_torch_function_is_not_asked():
    torch = _torch()
    asked: list[str] = []

    class Spy(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            asked.append(getattr(func, "__name__", "?"))
            return super().__torch_function__(func, types, args, kwargs or {})

    spy = torch.ones(3).as_subclass(Spy)
    spy.sum()
    assert asked  # with no guard, using it asks the subclass
    asked.clear()
    node = doc(spy)["roots"]["value"]
    assert asked == [] and node["dtype"] == "float32" and node["shape"] == [3]


def test_a_module_and_an_adam_optimizer_after_a_step_are_nested_data_with_shared_parameters():
    torch = _torch()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 4)).square().sum().backward()
    optimizer.step()
    value = snap.snapshot_roots({"args": [model, optimizer]}, max_bytes=1 << 20, max_depth=40, max_items=1000)
    parsed = parse(snap.dumps(value), max_bytes=1 << 20, max_depth=40)
    args = parsed.roots["args"]["items"]
    assert args[0]["class"] == "torch.nn.modules.linear.Linear"
    weight = rebuild(args[0]["attrs"]["_parameters"]["items"][0][1], parsed, {})
    assert weight[1] == "float32" and weight[3:5] == (True, True)
    assert torch.equal(torch.tensor(weight[2]), model.weight.detach())
    adam = args[1]["attrs"]
    assert args[1]["class"] == "torch.optim.adam.Adam"
    # The state is keyed by the model's parameters and param_groups lists them: each written once, by reference.
    state_keys = [pair[0] for pair in adam["state"]["base"]["items"]]
    assert [key["t"] for key in state_keys] == ["ref", "ref"]
    assert [parsed.paths[key["id"]] for key in state_keys] == [
        'args[0]._parameters["weight"]',
        'args[0]._parameters["bias"]',
    ]
    group = dict((k, v) for k, v in adam["param_groups"]["items"][0]["items"])
    assert group["params"]["items"] == state_keys
    step = dict((k, v) for k, v in adam["state"]["base"]["items"][0][1]["items"])
    exp_avg = rebuild(step["exp_avg"], parsed, {})
    assert torch.allclose(torch.tensor(exp_avg[2]), optimizer.state[model.weight]["exp_avg"])
    assert rebuild(step["step"], parsed, {})[2] == 1.0


def test_the_snapshot_runs_in_a_python_that_has_torch_but_not_numpy(tmp_path: Path):
    _torch()
    program = programs.source("snapshot") + (
        "\nimport sys\nsys.modules['numpy'] = None\nimport torch\n"
        "t = torch.arange(4, dtype=torch.bfloat16)\n"
        "sys.stdout.buffer.write(dumps(snapshot(t, max_bytes=4096, max_depth=8, max_items=8)))"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    parsed = parse(run.stdout, max_bytes=4096, max_depth=8)
    node = parsed.roots["value"]
    assert node["dtype"] == "bfloat16" and decode_array("bfloat16", node["data"], [4]).tolist() == [0, 1, 2, 3]
