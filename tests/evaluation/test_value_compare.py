"""The worker's side of the sealed replay (evaluation/judging/compare.py): untrusted snapshot bytes are refused at
the path of their first problem, and a replay differs from its recording exactly where and by how much it does."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import math
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.judging.compare import AtEntry, Difference, SnapshotError, compare, decode_array, entry_parse, parse
from sandbox.programs import snapshot as snap

MAX = {"max_bytes": 1 << 20, "max_depth": 20}


def value(obj: Any, **roots: Any) -> Any:
    """OBJ (or the named ROOTS) as the worker sees it after the sandbox wrote it."""
    document = snap.snapshot_roots(roots or {"value": obj}, max_bytes=1 << 20, max_depth=20, max_items=10_000)
    return parse(snap.dumps(document), **MAX)


def raw(node: Any, **roots: Any) -> bytes:
    """A hand-written document (what a hostile replay may send)."""
    return json.dumps({"v": 1, "roots": roots or {"value": node}}).encode()


def refused(data: bytes, **caps: int) -> SnapshotError:
    with pytest.raises(SnapshotError) as caught:
        parse(data, **{**MAX, **caps})
    return caught.value


def diff(recorded: Any, replayed: Any, *, rtol: float = 0.0, atol: float = 0.0) -> Difference | None:
    return compare(value(recorded), value(replayed), rtol=rtol, atol=atol)


# Parsing: what a hostile replay may write.


def test_a_valid_document_parses_and_a_difference_is_a_frozen_record():
    parsed = parse(raw({"t": "list", "items": [1, 2.5, "x", None, True]}), **MAX)
    assert parsed.roots["value"]["items"] == [1, 2.5, "x", None, True]
    found = diff([1], [2])
    assert found is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.path = "elsewhere"  # type: ignore[misc]


def test_more_bytes_than_allowed_are_refused_before_decoding():
    hundred_mb = b'{"v":1,"roots":{"value":"' + b"\xff" * (100 << 20) + b'"}}'
    started = time.perf_counter()
    error = refused(hundred_mb)
    assert time.perf_counter() - started < 1
    # Refused for its size, not for the bytes that are not UTF-8: it was never decoded.
    assert error.path == "$" and error.message == f"{len(hundred_mb)} bytes, more than the 1048576 allowed"


def test_a_long_string_within_the_cap_is_a_value_like_any_other():
    parsed = parse(raw("x" * 500_000), **MAX)
    assert len(parsed.roots["value"]) == 500_000


def test_bytes_that_are_not_utf8_are_refused():
    # With no guard, json.loads takes UTF-16 (and guesses the encoding of any bytes it is given).
    document = raw([]).decode().replace("[]", '"snow \u2603"')
    assert json.loads(document.encode("utf-16"))["roots"]["value"] == "snow \u2603"
    assert refused(document.encode("utf-16")).path == "$"
    error = refused(b'{"v":1,"roots":{"value":"\xff\xfe"}}')
    assert error.message == "not UTF-8 (byte 25)"


def test_nesting_deeper_than_the_json_parser_can_recurse_is_refused_with_where():
    deep = '{"v":1,"roots":{"value":' + '{"t":"list","items":[' * 200_000 + "]}" * 200_000 + "}}"
    # With no guard, the JSON parser runs out of stack: an error with no place in the document.
    with pytest.raises(RecursionError):
        json.loads(deep)
    error = refused(deep.encode(), max_bytes=1 << 24)
    assert (error.path, error.message) == ("$", "nested deeper than 20 (more than 64 JSON levels)")


def test_brackets_and_escapes_inside_strings_are_not_nesting():
    text = '\\"[{' * 1000 + "\\"  # backslashes and quotes escaped, brackets in the string
    assert parse(raw({"t": "list", "items": [text, text]}), **MAX).roots["value"]["items"] == [text, text]
    # A string that ends in an escaped backslash does not hide the real nesting that follows it.
    deep = '{"t":"list","items":[' * 100 + "]}" * 100
    document = '{"v":1,"roots":{"a":"x\\\\","b":' + deep + "}}"
    assert json.loads(document)["roots"]["a"] == "x\\"
    assert refused(document.encode()).message == "nested deeper than 20 (more than 64 JSON levels)"


def test_nesting_past_max_depth_is_refused_at_its_path():
    node: Any = 1
    for _ in range(22):
        node = {"t": "list", "items": [node]}
    error = refused(raw(node))
    assert error.path == "value" + "[0]" * 21 and error.message == "nested deeper than 20"


def test_nan_and_infinity_literals_are_refused_at_their_path():
    document = b'{"v":1,"roots":{"value":{"t":"list","items":[1.5,NaN]}}}'
    assert math.isnan(json.loads(document)["roots"]["value"]["items"][1])  # with no guard: a float
    error = refused(document)
    assert (error.path, error.message) == ("value[1]", "the literal NaN (not JSON; NaN and infinities are float nodes)")
    assert refused(document.replace(b"NaN", b"-Infinity")).path == "value[1]"
    assert refused(document.replace(b"NaN", b"1e999")).message == "the number 1e999 overflows a float"


def test_a_repeated_key_is_refused_where_it_repeats():
    # With no guard the last one wins: a replay could show one value to a reader and another to json.loads.
    document = b'{"v":1,"roots":{"value":{"t":"object","class":"A","attrs":{"w":1,"w":2}}}}'
    assert json.loads(document)["roots"]["value"]["attrs"] == {"w": 2}
    error = refused(document)
    assert (error.path, error.message) == ("value", "the attrs name 'w' twice")
    error = refused(b'{"v":1,"roots":{"value":{"t":"list","t":"dict","items":[]}}}')
    assert (error.path, error.message) == ("value", "the key 't' twice in one object")
    assert refused(b'{"v":1,"v":1,"roots":{"value":1}}').path == "$"


@pytest.mark.parametrize(
    ("node", "path", "message"),
    [
        ({"t": "list", "items": [], "extra": 1}, "value", "a list node with unknown key(s) 'extra'"),
        ({"t": "pickle", "data": "gASV"}, "value", "unknown node kind 'pickle'"),
        ({"items": []}, "value", "unknown node kind 'None'"),
        (
            {"t": "list", "items": [[1, 2]]},
            "value[0]",
            'a JSON array as a node (a list is {"t": "list", "items": [...]})',
        ),
        ({"t": "tuple"}, "value", "a tuple node without items"),
        ({"t": "int", "v": "12"}, "value", "an int node holds the decimal digits of an integer outside +-2**53"),
        (
            {"t": "int", "v": "0" + "9" * 20},
            "value",
            "an int node holds the decimal digits of an integer outside +-2**53",
        ),
        (
            {"t": "list", "items": [12345678901234567890]},
            "value[0]",
            "an integer of 20 digits (big ints are int nodes)",
        ),
        ({"t": "list", "items": [2**53 + 1]}, "value[0]", "an integer outside +-2**53 as a number (it is an int node)"),
        (
            {"t": "float", "v": "NaN"},
            "value",
            "a float must be a number with a fraction or one of nan, inf, -inf, -0.0",
        ),
        (
            {"t": "complex", "re": 1, "im": 0.0},
            "value.real",
            "a float must be a number with a fraction or one of nan, inf, -inf, -0.0",
        ),
        ({"t": "bytes", "b64": "Yh=="}, "value", "base64 that is not in its canonical form"),
        ({"t": "bytes", "b64": "*"}, "value", "invalid base64"),
        ({"t": "ref", "id": 7}, "value", "a ref to the id 7, which no node has"),
        (
            {"t": "list", "id": 1, "items": [{"t": "list", "id": 1, "items": []}]},
            "value[0]",
            "the id 1 twice (first at value)",
        ),
        (
            {"t": "ndarray", "dtype": "float128", "shape": [1], "b64": "AAAAAAAAAAAAAAAAAAAAAA=="},
            "value",
            "unknown dtype 'float128'",
        ),
        (
            {"t": "ndarray", "dtype": "object", "shape": [3], "items": [1, 2]},
            "value",
            "2 items where its shape makes 3",
        ),
        (
            {"t": "ndarray", "dtype": "str", "shape": [1], "items": [1]},
            "value[0]",
            "an item of a str array that is not str",
        ),
        (
            {"t": "ndarray", "dtype": "int8", "shape": [-1], "b64": ""},
            "value",
            "shape must be a list of at most 64 integers >= 0",
        ),
        (
            {"t": "object", "class": "A", "base": {"t": "object", "class": "B"}},
            "value",
            "an object's base is a builtin value",
        ),
        ({"t": "object", "class": ""}, "value", "class must be a str of 1 to 1000 characters"),
        (
            {"t": "tensor", "dtype": "float32", "shape": [], "b64": "AAAAAA==", "requires_grad": 1},
            "value",
            "requires_grad must be a boolean",
        ),
        (
            {"t": "tensor", "dtype": "float32", "shape": [], "b64": "AAAAAA==", "requires_grad": False, "grad": 1.5},
            "value.grad",
            "a tensor's grad is a tensor",
        ),
        (
            {"t": "truncated", "reason": "boredom"},
            "value",
            "a truncated node's reason is one of bytes, depth, digits, items",
        ),
        ({"t": "dict", "items": [[1]]}, "value[<pair #0>]", "a dict item must be a [key, value] pair"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_a_node_that_breaks_the_format_is_refused_at_its_path(node, path, message):
    error = refused(raw(node))
    assert (error.path, error.message) == (path, message)


def test_a_declared_shape_larger_than_its_data_is_refused_without_allocating_it():
    tensor = {"t": "tensor", "dtype": "float32", "shape": [10**9, 10**9], "b64": "AAAAAA==", "requires_grad": False}
    started = time.perf_counter()
    error = refused(raw({"t": "list", "items": [tensor]}))
    assert time.perf_counter() - started < 1
    assert (error.path, error.message) == (
        "value[0]",
        "8 base64 characters where its shape and dtype make 4 * 10**18 bytes".replace("4 * 10**18", str(4 * 10**18)),
    )


def test_base64_of_the_wrong_length_for_its_shape_is_refused():
    # With no guard, 3 float32 numbers decode as an array of 3, whatever shape the node claims.
    twelve_bytes = "AAAAAAAAAAAAAAAA"
    assert np.frombuffer(b"\0" * 12, dtype="<f4").size == 3
    for shape, dtype in (([2], "float32"), ([4], "float32"), ([5], "bfloat16"), ([1], "complex128")):
        node = {"t": "ndarray", "dtype": dtype, "shape": shape, "b64": twelve_bytes}
        error = refused(raw(node))
        assert error.path == "value" and "where its shape and dtype make" in error.message
    scalar = {"t": "npscalar", "dtype": "float64", "b64": "AAAAAA=="}
    assert refused(raw(scalar)).message == "8 base64 characters where its shape and dtype make 8 bytes"


def test_the_envelope_is_exactly_a_version_and_named_roots():
    assert refused(b"[1]").path == "$"
    assert refused(b'{"v":2,"roots":{"value":1}}').path == "$.v"
    assert refused(b'{"v":true,"roots":{"value":1}}').path == "$.v"
    assert refused(b'{"v":1,"roots":{}}').path == "$.roots"
    assert refused(b'{"v":1,"roots":{"value":1},"pickle":"x"}').path == "$"
    assert refused(b'{"v":1,"roots":{"value":1}} trailing').path == "$"
    assert refused(b'{"v":1,"roots":{"value":-0.0}}').message == "-0.0 as a number (it is written as the string '-0.0')"


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_no_bytes_make_parse_fail_other_than_with_a_snapshot_error(data):
    with contextlib.suppress(SnapshotError):
        parse(data, **MAX)  # anything else it raised would fail the test


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.data())
def test_no_mutation_of_a_real_snapshot_fails_other_than_with_a_snapshot_error(data):
    document = snap.dumps(
        snap.snapshot(
            {"a": [1.5, 2**60, b"xy", {"t": (1, None)}], "b": np.arange(6, dtype=np.float32).reshape(2, 3)},
            max_bytes=1 << 16,
            max_depth=10,
            max_items=100,
        )
    )
    position = data.draw(st.integers(0, len(document) - 1))
    replacement = data.draw(st.binary(min_size=0, max_size=3))
    try:
        mutated = parse(document[:position] + replacement + document[position + 1 :], **MAX)
    except SnapshotError:
        return
    # What parses compares with the original without error, both ways.
    original = parse(document, **MAX)
    for first, second in ((original, mutated), (mutated, original)):
        found = compare(first, second, rtol=0, atol=0)
        assert found is None or isinstance(found, Difference)


# Comparing: exact where it must be, within tolerance where the recording is floating.


def test_tolerance_is_inclusive_at_its_edge_and_relative_to_the_recording():
    # allowed = atol + rtol * |recorded| = 0.25 + 0.5 * 1.0 = 0.75, all exact in binary.
    assert diff(1.0, 1.75, rtol=0.5, atol=0.25) is None
    assert diff(1.0, 0.25, rtol=0.5, atol=0.25) is None
    found = diff(1.0, math.nextafter(1.75, 2), rtol=0.5, atol=0.25)
    assert found is not None and found.kind == "value" and found.path == "value"
    assert found.abs_error == pytest.approx(0.75) and found.rel_error == pytest.approx(0.75)
    # Relative to the recording, not the replay: 2.0 vs recorded 1.0 is 100% off; 1.0 vs recorded 2.0 is 50%.
    assert diff(1.0, 2.0, rtol=0.6) is not None
    assert diff(2.0, 1.0, rtol=0.6) is None


def test_arrays_compare_within_tolerance_and_name_the_first_element_off():
    recorded = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    near = recorded + np.float32(1e-6)
    assert diff(recorded, near, rtol=1e-5) is None
    far = recorded.copy()
    far[1, 0] += 0.5
    far[1, 1] += 1.0
    found = diff(recorded, far, rtol=1e-5, atol=1e-8)
    assert found is not None
    assert (found.path, found.kind) == ("value[1, 0]", "value")
    assert found.abs_error == pytest.approx(1.0) and found.rel_error == pytest.approx(0.25)
    assert found.message.startswith("2 of 4 values differ: 3.5 where the recording has 3.0")


def test_nan_matches_only_nan_in_the_same_place_and_infinities_their_own_sign():
    assert diff([math.nan, math.inf, -0.0], [math.nan, math.inf, 0.0]) is None
    assert diff(math.nan, 1.0, atol=1e9) is not None
    assert diff(1.0, math.nan, atol=1e9) is not None
    assert diff(math.inf, -math.inf, atol=1e9) is not None
    assert diff(math.inf, 1e308, rtol=1.0) is not None
    with_nan = np.array([1.0, np.nan, 3.0])
    assert diff(with_nan, with_nan.copy()) is None
    found = diff(with_nan, np.array([1.0, 2.0, 3.0]), atol=10)
    assert found is not None and found.path == "value[1]" and found.abs_error == math.inf


def test_integers_booleans_strings_and_bytes_compare_exactly_whatever_the_tolerance():
    loose = {"rtol": 1.0, "atol": 1e9}
    assert diff(3, 4, **loose) is not None
    assert diff(2**60, 2**60 + 1, **loose) is not None
    assert diff(np.array([1, 2], dtype=np.int64), np.array([1, 3], dtype=np.int64), **loose).path == "value[1]"
    assert diff(True, False, **loose) is not None
    assert diff("a", "b", **loose) is not None
    assert diff(b"ab", b"ac", **loose).message == "2 bytes where the recording has 2; they differ from byte 1"


def test_types_dtypes_shapes_and_classes_are_named_by_kind():
    assert diff(1, 1.0).kind == "type"
    assert diff(True, 1).kind == "type"
    assert diff([1], (1,)) is None  # one kind of sequence: the tests read items (an honest answer builds either)
    assert diff([1], {1}).kind == "type"
    assert diff(np.zeros(2, np.float32), np.zeros(2, np.float64)).kind == "dtype"
    assert diff(np.zeros((2, 3)), np.zeros((3, 2))).kind == "shape"
    assert diff([1, 2], [1, 2, 3]).kind == "structure"

    class A:
        def __init__(self) -> None:
            self.w = 1.0

    class B(A):
        pass

    found = diff(A(), B())
    assert found is not None and found.kind == "type" and "B" in found.message
    other = A()
    other.extra = 2  # type: ignore[attr-defined]
    found = diff(A(), other)
    assert (found.kind, found.message) == ("structure", "the attribute(s) extra the recording has not")


def test_dicts_with_plain_keys_match_by_key_whatever_their_order():
    assert diff({"a": 1.0, "b": 2.0}, {"b": 2.0, "a": 1.0}) is None
    found = diff({"a": 1.0, "b": 2.0}, {"b": 2.0, "a": 1.5})
    assert found is not None and found.path == 'value["a"]'
    found = diff({"a": 1, (1, 2): 2}, {"a": 1, (1, 3): 2})
    assert found is not None and found.kind == "structure" and "no key (1, 2)" in found.message


def test_shared_references_are_compared_by_what_they_refer_to_and_cycles_end():
    shared = [1.0]
    assert diff([shared, shared], [[1.0], [1.0]]) is None  # an answer may return copies where the reference shared
    found = diff([shared, shared], [[1.0], [2.0]])
    assert found is not None and found.path == "value[1][0]"
    loop: list[Any] = [1.0]
    loop.append(loop)
    other: list[Any] = [1.0]
    other.append(other)
    assert diff(loop, other) is None
    different: list[Any] = [2.0]
    different.append(different)
    assert diff(loop, different).path == "value[0]"


def test_a_hostile_replay_of_references_is_compared_in_linear_time():
    # A DAG of 2**60 paths written as 61 nodes: compared pairwise once each.
    node: Any = {"t": "list", "id": 0, "items": [1.5]}
    for i in range(1, 61):
        node = {"t": "list", "id": i, "items": [node, {"t": "ref", "id": i - 1}]}
    recorded = parse(raw(node), max_bytes=1 << 20, max_depth=100)
    started = time.perf_counter()
    assert compare(recorded, recorded, rtol=0, atol=0) is None
    assert time.perf_counter() - started < 5


def test_a_truncated_place_agrees_only_with_the_same_truncation():
    capped = dict(max_bytes=1 << 20, max_depth=20, max_items=3)
    short = parse(snap.dumps(snap.snapshot(list(range(10)), **capped)), **MAX)
    same = parse(snap.dumps(snap.snapshot(list(range(10)), **capped)), **MAX)
    whole = value(list(range(3)))
    assert short.truncated == ("value[3]",)
    assert compare(short, same, rtol=0, atol=0) is None
    found = compare(short, whole, rtol=0, atol=0)
    assert found is not None and found.kind == "structure"


def test_what_was_held_by_name_only_is_listed_for_the_caller():
    parsed = value([len, {"f": open(__file__)}, 1.5])  # noqa: SIM115 - the open file is the value
    assert parsed.opaque == ("value[0]", 'value[1]["f"]')
    assert value([1.5]).opaque == () and value([1.5]).truncated == ()


def test_roots_must_be_the_same_names():
    found = compare(value(None, ret=1), value(None, ret=1, extra=2), rtol=0, atol=0)
    assert found is not None and (found.path, found.kind) == ("$", "structure")


def test_tolerances_must_be_finite_and_not_negative():
    with pytest.raises(ValueError):
        compare(value(1), value(1), rtol=-1, atol=0)
    with pytest.raises(ValueError):
        compare(value(1), value(1), rtol=0, atol=math.nan)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=20),
    st.floats(0, 1e-2),
    st.floats(0, 1e-2),
    st.data(),
)
def test_compare_agrees_with_numpy_isclose(numbers, rtol, atol, data):
    recorded = np.array(numbers)
    noise = np.array(data.draw(st.lists(st.floats(-1e-2, 1e-2), min_size=len(numbers), max_size=len(numbers))))
    replayed = recorded + noise * np.abs(recorded) + noise
    found = diff(recorded, replayed, rtol=rtol, atol=atol)
    expected = bool(np.isclose(replayed, recorded, rtol=rtol, atol=atol).all())
    assert (found is None) == expected


def _torch() -> Any:
    return pytest.importorskip("torch")


def test_float8_and_bfloat16_decode_as_torch_does():
    torch = _torch()
    codes = bytes(range(256))
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        widened = torch.frombuffer(bytearray(codes), dtype=torch.uint8).view(getattr(torch, name)).float().numpy()
        assert np.array_equal(decode_array(name, codes, [256]), widened, equal_nan=True), name
    halves = np.arange(0, 65536, 251, dtype="<u2").tobytes()
    widened = torch.frombuffer(bytearray(halves), dtype=torch.bfloat16).float().numpy()
    assert np.array_equal(decode_array("bfloat16", halves, [len(halves) // 2]), widened, equal_nan=True)


def test_bfloat16_and_float16_tensors_compare_within_tolerance():
    torch = _torch()
    recorded = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)
    one_step = recorded.clone()
    one_step[2] = torch.tensor(3.0, dtype=torch.bfloat16).view(torch.int16).add(1).view(torch.bfloat16)  # one ulp
    found = diff(recorded, one_step)
    assert found is not None and found.path == "value[2]" and found.abs_error == pytest.approx(2**-6)
    assert diff(recorded, one_step, rtol=1e-2) is None
    assert diff(recorded, recorded.half()).kind == "dtype"
    assert diff(torch.ones(2), torch.nn.Parameter(torch.ones(2))).kind == "type"


def test_an_adam_step_that_differs_is_named_down_to_the_state_entry():
    torch = _torch()

    def trained(lr: float) -> tuple[Any, Any]:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        model(torch.randn(5, 4)).square().sum().backward()
        optimizer.step()
        return model, optimizer

    def recorded(lr: float) -> Any:
        model, optimizer = trained(lr)
        return value(None, **{"return": [optimizer]}, args=[model])

    assert compare(recorded(1e-3), recorded(1e-3), rtol=0, atol=0) is None
    found = compare(recorded(1e-3), recorded(2e-3), rtol=1e-6, atol=1e-9)
    assert found is not None and found.kind == "value"
    assert found.path == 'return[0].defaults["lr"]'
    # The same learning rate in the defaults, a different update: the first difference is in the state.
    model, optimizer = trained(1e-3)
    replay_model, replay_optimizer = trained(1e-3)
    replay_optimizer.state[replay_model.weight]["exp_avg"][1, 2] += 1e-3
    found = compare(
        value(None, **{"return": [optimizer]}, args=[model]),
        value(None, **{"return": [replay_optimizer]}, args=[replay_model]),
        rtol=1e-6,
        atol=1e-9,
    )
    assert found is not None
    assert found.path == 'return[0].state[<Parameter float32 [3, 4] #0>]["exp_avg"][1, 2]'
    # Seen first in the model, a parameter keys the state by reference to where it was.
    found = compare(
        value(None, args=[model], **{"return": [optimizer]}),
        value(None, args=[replay_model], **{"return": [replay_optimizer]}),
        rtol=1e-6,
        atol=1e-9,
    )
    assert found is not None
    assert found.path == 'return[0].state[<ref args[0]._parameters["weight"]>]["exp_avg"][1, 2]'
    assert found.abs_error == pytest.approx(1e-3, rel=1e-3)


def test_the_sealed_replay_judges_a_low_precision_tensor_at_its_resolution_and_no_looser_elsewhere():
    """A correct answer that orders its bfloat16 arithmetic otherwise than the reference is an ulp away from the
    recording: the replay that scores it agrees at the paper's own tolerance (numpy's defaults here), while a wrong
    bfloat16 value and float32 values that far apart still differ."""
    from evaluation.judging.sealed import _differs, recorded_tolerance

    def tensor(values: list[float], dtype: str) -> str:
        widened = np.array(values, dtype="<f4")
        # bfloat16 is float32's upper half (the values here are exact in it, so no rounding is lost).
        data = (widened.view("<u4") >> 16).astype("<u2").tobytes() if dtype == "bfloat16" else widened.tobytes()
        b64 = base64.b64encode(data).decode()
        node = {"t": "tensor", "dtype": dtype, "shape": [len(values)], "b64": b64, "requires_grad": False}
        return raw(node, **{"return": node}).decode()

    tolerance = recorded_tolerance({"tolerance": {"rtol": 1e-5, "atol": 1e-8}})
    recorded, one_ulp, wrong = [1.0, 2.0, 3.0], [1.0, 2.0, 3.0 + 2**-6], [1.0, 2.0, 3.25]
    assert _differs([tensor(recorded, "bfloat16")], [{"outputs": tensor(one_ulp, "bfloat16")}], tolerance) == ""
    assert _differs([tensor(recorded, "bfloat16")], [{"outputs": tensor(wrong, "bfloat16")}], tolerance)
    assert _differs([tensor(recorded, "float32")], [{"outputs": tensor(one_ulp, "float32")}], tolerance)


def test_a_numpy_scalar_is_the_python_scalar_of_its_kind_by_value():
    """attack11: an honest `np.argmax(x)` where the reference wrote `int(np.argmax(x))` (or `np.mean` for `sum / n`)
    passes assertEqual, assertAlmostEqual and assert_allclose: compared by value, within the same tolerance."""
    assert diff(0.7310585786300049, np.float64(0.7310585786300049)) is None
    assert diff(np.float64(0.25), 0.25) is None
    assert diff(1.0, np.float32(1.0 + 1e-7), rtol=1e-6) is None
    assert diff(3, np.int64(3)) is None and diff(np.uint8(3), 3) is None
    assert diff(True, np.bool_(True)) is None and diff(np.bool_(False), False) is None
    assert diff(1 + 2j, np.complex128(1 + 2j)) is None
    assert diff(math.nan, np.float64(math.nan)) is None
    # Its value is compared as the recording's kind's is: no looser.
    found = diff(1.0, np.float64(1.001), rtol=1e-5)
    assert found is not None and (found.kind, found.path) == ("value", "value")
    assert diff(3, np.int64(4), rtol=1.0, atol=1e9).kind == "value"
    assert diff(True, np.bool_(False)).kind == "value"
    assert diff(np.float64(1.0), math.inf).kind == "value"
    # Another kind stays a type difference, as between Python's own scalars.
    for recorded, replayed in ((2, np.float64(2.0)), (2.0, np.int64(2)), (1, np.bool_(True)), (True, np.int64(1))):
        found = diff(recorded, replayed)
        assert found is not None and found.kind == "type", (recorded, replayed, found)
    assert diff(1.0, np.array(1.0)).kind == "type"  # a 0-d array is not a scalar


def state(obj: Any, *, returned: Any = None) -> Any:
    """What a call leaves: OBJ as the state of its first argument at exit."""
    return value(None, **{"return": returned}, args=[obj])


def test_extra_state_left_in_an_argument_is_a_difference():
    """attack12: an answer that leaves out a deletion (an eviction loop that evicts nothing, `del self.pending`)
    leaves a key or attribute the recording has not, and nothing else; a blanket tolerance for extra state let it
    pass. With no names at entry (a version-1 recording) nothing tells a key the call should have removed from one
    it may add: every extra one is a difference (the names at entry: the tests below)."""

    class Memory:
        def __init__(self, **entries: Any) -> None:
            self.capacity = 2
            self.entries = entries

    recorded = Memory(k1=1.0, k2=2.0)
    found = compare(state(recorded), state(Memory(k0=0.0, k1=1.0, k2=2.0)), rtol=0, atol=0)
    assert found is not None and found.kind == "structure" and '"k0"' in found.message, found
    pending = Memory(k1=1.0, k2=2.0)
    pending.pending = [0.0]  # type: ignore[attr-defined]
    found = compare(state(recorded), state(pending), rtol=0, atol=0)
    assert found is not None and found.kind == "structure" and "pending" in found.message, found
    # Every recorded entry is compared, and one missing is a difference.
    found = compare(state(recorded), state(Memory(k1=1.5, k2=2.0)), rtol=0, atol=0)
    assert found is not None and found.path == 'args[0].entries["k1"]'
    found = compare(state(recorded), state(Memory(k2=2.0)), rtol=0, atol=0)
    assert found is not None and found.kind == "structure" and 'no key "k1"' in found.message


def test_extra_state_that_could_stand_for_code_or_the_return_value_stays_a_difference():
    """Extra state of any kind is a difference: an extra attribute that is a function, method or object (it may
    shadow a method of the class), a dunder name, another class, and extra keys in what the call returned."""

    class Optimiser:
        def __init__(self) -> None:
            self.lr = 0.1

        def step(self) -> float:
            return self.lr

    class Other(Optimiser):
        pass

    recorded = state(Optimiser())
    for name, extra in (
        ("step", lambda: 0.0),
        ("step", Optimiser().step),
        ("step", Other()),
        ("helper", len),
        ("__class__", "Optimiser"),
    ):
        shadowed = Optimiser()
        shadowed.__dict__[name] = extra
        found = compare(recorded, state(shadowed), rtol=0, atol=0)
        assert found is not None and found.kind == "structure" and name in found.message, (name, found)
    assert compare(recorded, state(Other()), rtol=0, atol=0).kind == "type"
    found = compare(
        state(None, returned={"loss": 1.0}), state(None, returned={"loss": 1.0, "aux": 0.0}), rtol=0, atol=0
    )
    assert found is not None and found.path == "return" and '"aux"' in found.message
    returned = Optimiser()
    returned.extra = 1  # type: ignore[attr-defined]
    found = compare(state(None, returned=Optimiser()), state(None, returned=returned), rtol=0, atol=0)
    assert found is not None and found.path == "return"


# The names at entry (snapshot.entry_names, compare.AtEntry): what tells an entry the answer added from one the
# reference removed.


def at_entry(*arguments: Any) -> AtEntry:
    """The names at entry of a call on ARGUMENTS, as the recorder writes them and the worker reads them."""
    names = snap.entry_names({"args": list(arguments), "kwargs": {}}, max_bytes=1 << 20, max_depth=20, max_items=100)
    assert names is not None
    found = entry_parse(json.dumps(names))
    assert found is not None
    return found


def judged(recorded: Any, replayed: Any, entry: AtEntry | None) -> tuple[Difference | None, list[str]]:
    notes: list[str] = []
    return compare(state(recorded), state(replayed), rtol=0, atol=0, entry=entry, notes=notes), notes


class Optimiser:
    def __init__(self, **slots: Any) -> None:
        self.lr = 0.1
        self.state = slots


class Memory:
    def __init__(self, **entries: Any) -> None:
        self.capacity = 2
        self.entries = entries


def test_an_honest_extra_key_the_arguments_did_not_hold_at_entry_is_noted_not_a_difference():
    """attack11's honest `state["step"]`: the reference's state at entry had no "step" anywhere."""
    entry = at_entry(Optimiser(m=np.zeros(2)))
    found, notes = judged(Optimiser(m=np.ones(2)), Optimiser(m=np.ones(2), step=0), entry)
    assert found is None and len(notes) == 1, (found, notes)
    assert notes[0].startswith('at args[0].state: the answer added the key(s) "step"'), notes
    # Without the names at entry (a version-1 recording) it is a difference, as before.
    found, notes = judged(Optimiser(m=np.ones(2)), Optimiser(m=np.ones(2), step=0), None)
    assert found is not None and found.kind == "structure" and '"step"' in found.message and not notes
    # The recorded entries are still compared, and one missing is still a difference.
    found, _ = judged(Optimiser(m=np.ones(2)), Optimiser(m=np.zeros(2), step=0), entry)
    assert found is not None and found.path == 'args[0].state["m"][0]'
    found, _ = judged(Optimiser(m=np.ones(2)), Optimiser(step=0), entry)
    assert found is not None and 'no key "m"' in found.message


def test_a_deletion_left_out_stays_a_difference_that_names_it():
    """attack12: an eviction loop that evicts nothing leaves "k0", which the arguments held at entry and the
    reference's call removed. With a blanket tolerance (no name held at entry) it passed: the names decide."""
    entry = at_entry(Memory(k0=0.0, k1=1.0))  # the call stores k2, then evicts the oldest
    recorded, kept = Memory(k1=1.0, k2=2.0), Memory(k0=0.0, k1=1.0, k2=2.0)
    blanket = AtEntry(frozenset(), frozenset())
    assert judged(recorded, kept, blanket) == (
        None,
        [
            'at args[0].entries: the answer added the key(s) "k0", '
            "which the reference does not keep and the arguments did not "
            "hold at entry"
        ],
    )
    found, notes = judged(recorded, kept, entry)
    assert found is not None and found.kind == "structure" and found.path == "args[0].entries", found
    assert found.message == (
        'the reference removed the key(s) "k0" (the arguments held them at entry); the answer left them'
    ), found
    assert not notes
    # Removed and added in one dict: the removal is the difference.
    found, _ = judged(recorded, Memory(k0=0.0, k1=1.0, k2=2.0, hits=1), entry)
    assert found is not None and 'removed the key(s) "k0"' in found.message


def test_an_honest_extra_attribute_is_noted_and_one_the_reference_deleted_stays_a_difference():
    class Buffer:
        def __init__(self, pending: list[float] | None = None) -> None:
            self.total = 0.0
            if pending is not None:
                self.pending = pending

    # The reference flushes: `self.total += sum(self.pending); del self.pending`.
    entry = at_entry(Buffer([1.0, 2.0]))
    flushed = Buffer()
    flushed.total = 3.0
    added = Buffer()
    added.total, added.flushes = 3.0, 1  # type: ignore[attr-defined]  # an honest counter the tests never read
    found, notes = judged(flushed, added, entry)
    assert found is None and notes == [
        "at args[0]: the answer added the attribute(s) flushes, which the reference does not keep and the arguments "
        "did not hold at entry"
    ], (found, notes)
    left = Buffer([])
    left.total = 3.0
    found, notes = judged(flushed, left, entry)
    assert (
        found is not None
        and found.path == "args[0]"
        and found.message
        == ("the reference removed the attribute(s) pending (the arguments held them at entry); the answer left them")
    ), found
    assert not notes


def test_nested_entries_are_judged_by_the_names_anywhere_in_the_arguments_at_entry():
    """A key held at entry anywhere in the arguments counts as held, whichever container the reference moved or
    rebuilt it into: a list shifted by a pop, or a dict swapped for a filtered copy, has no place of its own to look."""
    inner = [{"id": 1, "stale": True}, {"id": 2}]
    entry = at_entry({"queue": inner, "meta": {"seen": 0}})
    # The reference pops the first item and drops "stale" from what it moved on: the answer that keeps it differs.
    recorded = {"queue": [{"id": 2}], "meta": {"seen": 1}}
    found, _ = judged(recorded, {"queue": [{"id": 2, "stale": True}], "meta": {"seen": 1}}, entry)
    assert found is not None and found.path == 'args[0]["queue"][0]' and 'removed the key(s) "stale"' in found.message
    # A key added deep in a nested dict, held nowhere at entry, is noted with its path.
    found, notes = judged(recorded, {"queue": [{"id": 2}], "meta": {"seen": 1, "last": 2}}, entry)
    assert found is None and notes and notes[0].startswith('at args[0]["meta"]: the answer added the key(s) "last"')
    # A key at entry in another container counts too (conservative: still a difference, as before).
    found, _ = judged(recorded, {"queue": [{"id": 2}], "meta": {"seen": 1, "id": 2}}, entry)
    assert found is not None and 'removed the key(s) "id"' in found.message
    # Objects nested in dicts: an attribute added on one is noted.
    entry = at_entry({"slots": [Memory(a=1.0)]})
    grown = Memory(a=1.0)
    grown.hits = 2  # type: ignore[attr-defined]
    found, notes = judged({"slots": [Memory(a=1.0)]}, {"slots": [grown]}, entry)
    assert found is None and notes[0].startswith('at args[0]["slots"][0]: the answer added the attribute(s) hits')


def test_what_the_names_at_entry_never_tolerate():
    """In what the call returned, code in the state (a function, a method, an object: it may shadow a method), a
    dunder name, and a call whose walk at entry reached a cap (its names are unknown)."""

    class Stepper:
        def __init__(self) -> None:
            self.lr = 0.1

        def step(self) -> float:
            return self.lr

    entry = at_entry(Stepper())
    for name, extra in (("step", lambda: 0.0), ("step", Stepper().step), ("helper", len), ("other", Stepper())):
        shadowed = Stepper()
        shadowed.__dict__[name] = extra
        found, notes = judged(Stepper(), shadowed, entry)
        assert found is not None and name in found.message and not notes, (name, found)
    shadowed = Stepper()
    shadowed.__dict__["__class__"] = "Stepper"
    assert judged(Stepper(), shadowed, entry)[0] is not None
    notes: list[str] = []
    found = compare(
        state(None, returned={"loss": 1.0}),
        state(None, returned={"loss": 1.0, "aux": 0.0}),
        rtol=0,
        atol=0,
        entry=entry,
        notes=notes,
    )
    assert found is not None and found.path == "return" and not notes
    # A cap reached at entry: no names, so nothing is tolerated.
    assert snap.entry_names({"args": [dict.fromkeys(range(5))]}, max_bytes=1 << 20, max_depth=20, max_items=3) is None
    assert snap.entry_names({"args": [[[[1]]]]}, max_bytes=1 << 20, max_depth=2, max_items=3) is None


def test_names_at_entry_that_are_not_exactly_the_format_are_none():
    assert entry_parse('{"keys": ["\\"a\\""], "attrs": ["b"]}') == AtEntry(frozenset(['"a"']), frozenset(["b"]))
    for text in (
        None,
        3,
        "",
        "[]",
        '{"keys": []}',
        '{"keys": [], "attrs": [1]}',
        '{"keys": [], "attrs": [], "x": 1}',
        '{"keys": [], "keys": [], "attrs": []}',
        '{"keys": [NaN], "attrs": []}',
    ):
        assert entry_parse(text) is None, text


def test_names_at_entry_skip_numbers_bytes_and_read_no_method():
    class Loud:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError("read through getattr")

        def __eq__(self, other: object) -> bool:
            raise AssertionError("compared")

        __hash__ = object.__hash__

    loud = Loud()
    loud.weights = np.zeros(10_000)  # type: ignore[attr-defined]
    names = snap.entry_names(
        {"args": [loud, {("a", 1): b"x" * 10_000, 7: None}], "kwargs": {"flag": True}},
        max_bytes=20_000,
        max_depth=20,
        max_items=100,
    )
    assert names == {"keys": ['"flag"', '("a", 1)', "7"], "attrs": ["weights"]}, names
