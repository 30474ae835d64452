"""codethinker.sandbox.protocol: the child -> parent frame format (round trips, limits, hostile frames)."""

from __future__ import annotations

import collections
import math
import pickle
import re
import sys
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codethinker.contra.values import MAX_DEPTH as CANONICAL_MAX_DEPTH
from codethinker.sandbox.protocol import MAX_DEPTH, MAX_EQUAL_HASHES, MAX_ITEMS, WireError, decode, encode
from codethinker.sandbox.protocol.base import VALUE_MAX_DEPTH

P = sys.hash_info.modulus  # ints congruent modulo P share one hash


def _key(x):
    """A type-strict, order-keeping (except sets), nan-aware fingerprint of a value."""
    t = type(x)
    if t in (float, complex):
        return f"{t.__name__}:{x!r}"  # 'nan', '-0.0', 'inf' compare by their repr
    if t in (list, tuple):
        return (t.__name__, tuple(_key(v) for v in x))
    if t in (set, frozenset):
        return (t.__name__, tuple(sorted((_key(v) for v in x), key=repr)))
    if t is dict:
        return ("dict", tuple((_key(k), _key(v)) for k, v in x.items()))
    return (t.__name__, x)


def _holds(x, inside: bool = False) -> bool:
    """Whether ``x`` holds, through tuples, a frozenset holding a frozenset (``inside``: a frozenset)."""
    if type(x) is tuple:
        return any(_holds(y, inside) for y in x)
    if type(x) is frozenset:
        return inside or any(_holds(y, True) for y in x)
    return False


def _nested_frozensets_collide(x) -> bool:
    """Whether a set, frozenset or dict in ``x`` holds elements of one hash, one of them holding a
    frozenset of frozensets."""
    if type(x) in (list, tuple):
        return any(_nested_frozensets_collide(y) for y in x)
    if type(x) is dict:
        return _nested_frozensets_collide(set(x)) or _nested_frozensets_collide(list(x.values()))
    if type(x) in (set, frozenset):
        hashes = collections.Counter(map(hash, x))
        return any(hashes[hash(y)] > 1 and _holds(y) for y in x) or any(_nested_frozensets_collide(y) for y in x)
    return False


def _roundtrip(value):
    return decode(encode(value))


def _comes_back_unless_nested_frozensets_collide(value) -> None:
    """A value comes back equal, with its types; or, where a set, frozenset or dict holds two elements
    of one hash and one of them holds a frozenset of frozensets, it is refused (comparing them
    multiplies with each level of nesting)."""
    if _nested_frozensets_collide(value):
        with pytest.raises(WireError, match="frozenset of frozensets shares its hash"):
            _roundtrip(value)
    else:
        assert _key(_roundtrip(value)) == _key(value)


def _array(items: list[bytes]) -> bytes:
    return b"[" + b",".join(items) + b"]"


def _big(n: int) -> bytes:
    return b'{"i":"%x"}' % n if n >= 0 else b'{"i":"-%x"}' % -n


# --------------------------------------------------------------------------- strategies
_SPECIAL_STRINGS = ["", "\0", "\0t", '"', "\\", "[", "]", "{", "}", ",", ":", "\\u0041", '\\"', "\ud800", "\U0001f600"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**64 - 1, 2**64, -(2**64) + 1, -(2**64), 2**1000, -(3**700), P, -P]),
    st.floats(),
    st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308]),
    st.complex_numbers(allow_nan=True, allow_infinity=True),
    st.text(st.characters(blacklist_categories=()), max_size=12),
    st.sampled_from(_SPECIAL_STRINGS),
    st.binary(max_size=12),
)
_COLLIDING = [0, False, 0.0, "", b"", -1, -2, P, 2 * P, -P]  # hash 0 or -2: equal hashes, not all equal values
hashables = st.recursive(
    scalars | st.sampled_from(_COLLIDING),
    lambda kids: st.lists(kids, max_size=3).map(tuple) | st.frozensets(kids, max_size=3),
    max_leaves=8,
)
_HOLE = object()
_templates = st.recursive(  # a value with holes, filled twice below
    st.sampled_from([_HOLE, None, 1, "x"]),
    lambda kids: st.lists(kids, min_size=1, max_size=2).map(tuple) | st.frozensets(kids, min_size=1, max_size=2),
    max_leaves=5,
).filter(lambda t: _fill(t, 0) != _fill(t, ""))


def _fill(t, v):
    if t is _HOLE:
        return v
    if type(t) in (tuple, frozenset):
        return type(t)(_fill(x, v) for x in t)
    return t


# two values of one template, its holes filled with two unequal values of one hash: their hashes are equal
twins = st.builds(
    lambda t, pair: [_fill(t, pair[0]), _fill(t, pair[1])],
    _templates,
    st.sampled_from([(0, ""), ("", b""), (-1, -2), (0, P), (P, -P)]),
)
values = st.recursive(
    scalars,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.lists(kids, max_size=4).map(tuple)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
        | st.dictionaries(hashables, kids, max_size=4)
    ),
    max_leaves=24,
)


# --------------------------------------------------------------------------- round trips
class TestRoundTrip:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(values)
    def test_any_plain_value_comes_back_equal_with_its_types(self, value):
        _comes_back_unless_nested_frozensets_collide(value)

    @settings(max_examples=300, deadline=None)
    @given(twins, st.sampled_from([set, frozenset, dict.fromkeys]))
    def test_elements_of_one_hash_come_back_unless_they_nest_frozensets(self, pair, make):
        _comes_back_unless_nested_frozensets_collide(make(pair))

    @settings(max_examples=100, deadline=None)
    @given(values)
    def test_frames_are_ascii_without_white_space_outside_strings(self, value):
        data = encode(value)
        assert data.isascii()
        outside = re.sub(rb'"[^"]*"', b"", data)  # strings hold no raw quote
        assert not any(c in outside for c in b" \t\r\n")

    @settings(max_examples=100, deadline=None)
    @given(st.text(st.characters(blacklist_categories=())))
    def test_strings_hold_no_structural_bytes(self, text):
        data = encode(text)
        if data.startswith(b'"'):  # else a str holding surrogates, as base64
            for c in b'"[]{},:':
                assert c not in data[1:-1]
            assert b'\\"' not in data and b"\\\\" not in data
        assert decode(data) == text

    @settings(max_examples=200, deadline=None)
    @given(st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010) | st.sampled_from("a\U0001f600")))
    def test_surrogates_stay_as_they_are(self, text):
        out = _roundtrip([text, {text: text}])
        assert out == [text, {text: text}]
        assert [len(out[0]), len(next(iter(out[1])))] == [len(text), len(text)]


class TestFrames:
    """The frames the sandbox child sends, as its code builds them."""

    def test_a_trace_runner_result_with_shared_snapshots(self):
        snap = {"nums": [3, 1, 2], "i": 0, "seen": {1, 2}, "pair": (1, "a"), "total": 2.5}
        exits = [snap, snap, snap, {"nums": [1, 2, 3], "i": 2, "out": None}]  # skipped blocks share one dict
        frame = {
            "status": "ok",
            "value": {"value": [1, 2, 3], "exits": exits},
            "error_type": None,
            "error_message": None,
            "stdout": "line 1\nline 2: [x, y] {z}\n",
            "stderr": "",
            "duration_s": 0.00123,
            "dirty": None,
        }
        out = decode(encode(frame))
        assert out == frame and _key(out) == _key(frame)
        assert out["value"]["exits"][0] is not out["value"]["exits"][1]  # written out, never shared

    @pytest.mark.parametrize(
        "frame",
        [
            {"ready": True},
            {"pure": False, "reason": "imports os"},
            {"status": "error", "error_type": "ResultNotSerializable", "error_message": "x", "duration_s": 0.1},
            {"status": "timeout", "value": None, "stdout": "\ud800", "stderr": "é" * 10},
        ],
        ids=lambda f: next(iter(f)),
    )
    def test_control_frames(self, frame):
        assert decode(encode(frame)) == frame


class TestTypes:
    @pytest.mark.parametrize(
        "value",
        [
            (),
            (1,),
            ((1, 2), [3]),
            set(),
            {1, "a", (2, 3)},
            frozenset(),
            frozenset({frozenset({1}), (2, frozenset())}),
            {},
            {(1, 2): "t", frozenset({3}): "f", None: 0, True: 1, 2.5: 2, 3j: 3, b"k": 4, 2**70: 5},
            [1, True, 1.0, 1j],
            ["\0t", 1],
            ["\0"],
            [2**64 - 1, 2**64, -(2**64) + 1, -(2**64)],
            b"\x00\xff",
            "\ud800\udfff",
        ],
        ids=repr,
    )
    def test_exact_types_are_kept(self, value):
        assert _key(_roundtrip(value)) == _key(value)

    def test_floats_keep_sign_nan_and_infinity(self):
        out = _roundtrip([-0.0, math.nan, math.inf, -math.inf, complex(-0.0, math.nan)])
        assert math.copysign(1.0, out[0]) == -1.0
        assert math.isnan(out[1]) and out[2] == math.inf and out[3] == -math.inf
        assert repr(out[4]) == repr(complex(-0.0, math.nan))

    def test_a_set_keeps_every_nan(self):
        out = _roundtrip({math.nan, float("nan"), 1.0})
        assert type(out) is set and len(out) == 3

    def test_one_true_and_one_point_zero_stay_apart(self):
        out = _roundtrip({"i": 1, "b": True, "f": 1.0})
        assert [type(v) for v in out.values()] == [int, bool, float]

    def test_dict_order_is_kept(self):
        value = {k: i for i, k in enumerate("zyxwvu")}
        assert list(_roundtrip(value)) == list(value)

    @pytest.mark.parametrize(
        "value",
        [
            object(),
            bytearray(b"x"),
            memoryview(b"x"),
            range(3),
            collections.deque([1]),
            collections.Counter("ab"),
            collections.OrderedDict(a=1),
            len,
            type("MyInt", (int,), {})(3),
            type("MyStr", (str,), {})("x"),
            [1, [2, object()]],
            {1: type("MyList", (list,), {})()},
        ],
        ids=lambda v: type(v).__name__,
    )
    def test_anything_else_is_refused(self, value):
        with pytest.raises(WireError, match="not plain data"):
            encode(value)

    def test_wire_error_is_a_value_error(self):
        assert issubclass(WireError, ValueError)


class TestShape:
    """The format checks the encoding only: shape checks are the caller's job."""

    @pytest.mark.parametrize(
        "frame",
        [
            {"status": "ok", "value": 1},
            {"status": 7, "value": {"exits": "no"}, "duration_s": "1"},
            {"pure": "yes"},
            ["status", "ok"],
            None,
        ],
        ids=repr,
    )
    def test_wrong_typed_fields_pass_through_as_data(self, frame):
        assert decode(encode(frame)) == frame


# --------------------------------------------------------------------------- size
class TestSize:
    def test_issue_frame_a_repeated_large_string(self):
        """The issue's ~108 KB pickle frame that became a 600 MB truth JSON: pickle shares the one
        string, the wire format would have to write every copy, so encode refuses it."""
        big = "x" * 100_000
        value = {"status": "ok", "value": {"value": None, "exits": [{"s": big}] * 6_000}}
        assert len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)) < 120_000
        with pytest.raises(WireError, match="exceeds"):
            encode(value)
        with pytest.raises(WireError):
            decode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def test_encode_stops_early_on_a_huge_expansion(self):
        value = ["y" * 1_000_000] * 1_000_000  # 10**12 bytes written out
        with pytest.raises(WireError, match="exceeds"):
            encode(value)

    def test_max_bytes_is_the_limit(self):
        value = ["ab"] * 10  # '["ab","ab",...]': 2 + 10 * 4 + 9
        assert len(encode(value)) == 51
        assert encode(value, max_bytes=51) == encode(value)
        with pytest.raises(WireError):
            encode(value, max_bytes=50)
        with pytest.raises(WireError, match="exceeds"):
            decode(encode(value), max_bytes=50)

    def test_the_large_types_count_toward_max_bytes(self):
        for value in ("s" * 100, b"b" * 100, 2**1000):
            with pytest.raises(WireError):
                encode(value, max_bytes=60)

    @pytest.mark.parametrize(
        "data",
        [
            _array([b"[]"] * 20_000),
            _array([b'{"s":[]}'] * 20_000),
            _array([b'{"f":[0]}'] * 20_000),
            _array([b'{"d":[0,0]}'] * 20_000),
            _array([b'"ab"'] * 20_000),
            _array([b"1.5"] * 20_000),
            b'["' + b"x" * 200_000 + b'"]',
        ],
        ids=["lists", "sets", "frozensets", "dicts", "strings", "floats", "one string"],
    )
    def test_a_forged_frame_builds_at_most_linear_memory(self, data):
        tracemalloc.start()
        try:
            value = decode(data)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert value
        assert peak < 32 * len(data)

    def test_encode_counts_values_as_decode_does(self):
        """A value of more than MAX_ITEMS values used to pass encode (it counts bytes) and be refused by
        decode: now both refuse at the same count (one per value, one more per empty container)."""
        assert len(decode(encode([0] * (MAX_ITEMS - 1)))) == MAX_ITEMS - 1
        with pytest.raises(WireError, match="more than 2097152 values"):
            encode([0] * MAX_ITEMS)
        with pytest.raises(WireError, match="more than"):
            decode(_array([b"0"] * MAX_ITEMS))
        for value, n in [([], 2), ([[]], 3), ([1, [2, []]], 6), ({1: (2,)}, 4), ((), 2), ("s", 1)]:
            assert len(encode(value, max_items=n)) > 0
            decode(encode(value), max_items=n)
            with pytest.raises(WireError, match="more than"):
                encode(value, max_items=n - 1)
            with pytest.raises(WireError, match="more than"):
                decode(encode(value), max_items=n - 1)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(values, st.integers(1, 40))
    def test_encode_refuses_exactly_what_decode_refuses_by_count(self, value, limit):
        try:
            data = encode(value, max_items=limit)
        except WireError:
            data = None
        full = encode(value)
        try:
            decode(full, max_items=limit)
            accepted = True
        except WireError:
            accepted = False
        assert (data is not None) == accepted
        if data is not None:
            assert data == full

    def test_a_private_encoder_ignores_what_is_patched_in_the_module(self, monkeypatch):
        from codethinker.sandbox.protocol import encoding

        private = encoding.make_encoder()
        monkeypatch.setattr(encoding, "encode", lambda *a, **k: b"forged")
        monkeypatch.setattr("builtins.len", lambda x: 0)
        assert private({"a": (1, "x")}) == b'{"d":["a",{"t":[1,"x"]}]}'

    def test_max_items_is_checked_before_parsing(self):
        data = _array([b"0"] * 1000)
        assert len(decode(data, max_items=1001)) == 1000
        with pytest.raises(WireError, match="more than"):
            decode(data, max_items=1000)
        with pytest.raises(WireError, match="more than"):
            decode(_array([b'{"t":[]}'] * 600), max_items=1000)


# --------------------------------------------------------------------------- hash flooding
class TestHashFlooding:
    def test_issue_frame_b_40000_ints_of_one_hash(self):
        data = b'{"s":' + _array([_big(k * P) for k in range(40_000)]) + b"}"
        with pytest.raises(WireError, match="share one hash"):
            decode(data)

    def test_colliding_dict_keys(self):
        items = []
        for k in range(1, 5_000):
            items += [_big(k * P), b"0"]
        with pytest.raises(WireError, match="dict keys share one hash"):
            decode(b'{"d":' + _array(items) + b"}")

    def test_colliding_tuples(self):
        data = b'{"s":' + _array([b'{"t":[%s,1]}' % _big(k * P) for k in range(1, 2_000)]) + b"}"
        with pytest.raises(WireError, match="share one hash"):
            decode(data)

    def test_colliding_floats_ints_and_complex(self):
        floats = [repr(2.0 ** (61 * j)).encode() for j in range(-17, 17)]  # hash 1: 2**61 == 1 (mod P)
        assert {hash(float(f)) for f in floats} == {1}
        ints = [_big(k * P + 1) for k in range(1, 200)]
        cplx = [b'{"c":"%s 0.0"}' % f for f in floats]  # hash(complex(x, 0)) == hash(x)
        with pytest.raises(WireError, match="share one hash"):
            decode(b'{"s":' + _array(floats + ints) + b"}")
        with pytest.raises(WireError, match="share one hash"):
            decode(b'{"f":' + _array(floats + cplx[1:]) + b"}")

    def test_colliding_frozensets(self):
        data = b'{"s":' + _array([b'{"f":[%s]}' % _big(k * P) for k in range(1, 100)]) + b"}"
        with pytest.raises(WireError, match="share one hash"):
            decode(data)

    def test_frozensets_of_one_hash_come_back(self):
        """Values whose hashes coincide make frozensets that share one (hash(False) == hash("") == 0,
        hash(-1) == hash(-2)): plain values, decoded as sent (they were refused before)."""
        pair = {frozenset({False, None}), frozenset({"", None})}  # found by the round-trip property
        assert len({hash(f) for f in pair}) == 1
        assert _key(_roundtrip(pair)) == _key(pair)
        big = {frozenset({-1, *range(100)}), frozenset({-2, *range(100)}), frozenset({b"", -1, *range(1, 100)})}
        assert len({hash(f) for f in big}) == 1
        assert _key(_roundtrip(big)) == _key(big)
        keys = {(1, frozenset({0, P})): 1, (1, frozenset({0, 2 * P})): 2}
        assert _roundtrip(keys) == keys
        assert _roundtrip({0, P}) == {0, P}  # colliding ints alone are fine

    def test_two_frozensets_of_frozensets_of_equal_hash_are_refused(self):
        """Comparing frozensets of frozensets whose elements share hashes multiplies with each level of
        nesting, so even two of them may not collide (no element count limit catches this)."""
        a, b = frozenset({frozenset({0, P})}), frozenset({frozenset({0, 2 * P})})
        assert hash(a) == hash(b) and a != b
        with pytest.raises(WireError, match="frozenset of frozensets shares its hash"):
            decode(encode([{a, b}]))
        with pytest.raises(WireError, match="frozenset of frozensets shares its hash"):
            decode(encode({(1, (a,)): 1, (1, (b,)): 2}))
        assert _roundtrip({a, frozenset({frozenset({1})})}) == {a, frozenset({frozenset({1})})}  # no collision

    def test_frozensets_of_one_hash_whose_values_collide_are_refused(self):
        """32 frozensets of one hash, each of 64 ints 32 to a hash: building their set would compare
        each value with 32 others in each of 31 frozensets; refused before any is compared."""
        sets = [frozenset(k * P + g for g in range(2) for k in range(32 * j + 1, 32 * j + 33)) for j in range(32)]
        assert len({hash(f) for f in sets}) == 1 and len(set(sets)) == 32
        frame = encode(set(sets))
        t0 = time.perf_counter()
        with pytest.raises(WireError, match="holding frozensets share hashes"):
            decode(frame)
        assert time.perf_counter() - t0 < 1.0
        two = {sets[0], sets[1]}  # two of them: 2 x 2,113 comparisons for 130 values, still over 32 each
        with pytest.raises(WireError, match="holding frozensets share hashes"):
            decode(encode(two))

    def test_up_to_the_limit_of_equal_hashes_is_accepted(self):
        ok = {k * P for k in range(MAX_EQUAL_HASHES)}
        assert _roundtrip(ok) == ok
        with pytest.raises(WireError, match="share one hash"):
            _roundtrip(ok | {MAX_EQUAL_HASHES * P})

    def test_ordinary_collisions_are_accepted(self):
        powers = {2**k for k in range(1_000)}  # 2**k == 2**(k % 61) (mod P): 17 per hash
        assert _roundtrip(powers) == powers
        assert _roundtrip({-1, -2, (1, -1), (1, -2)}) == {-1, -2, (1, -1), (1, -2)}
        names = {f"v{i}": i for i in range(5_000)}
        assert _roundtrip(names) == names

    @pytest.mark.parametrize(
        "data",
        [b'{"s":[1,1]}', b'{"f":["a","a"]}', b'{"d":[1,2,1,3]}', b'{"s":[1,1.0]}'],
        ids=repr,
    )
    def test_repeated_elements_are_refused(self, data):
        with pytest.raises(WireError, match="repeated"):
            decode(data)

    @pytest.mark.parametrize(
        "data", [b'{"s":[[1]]}', b'{"f":[{"s":[]}]}', b'{"d":[{"d":[]},1]}', b'{"s":[{"t":[[]]}]}'], ids=repr
    )
    def test_unhashable_elements_are_refused(self, data):
        with pytest.raises(WireError, match="unhashable"):
            decode(data)


# --------------------------------------------------------------------------- nesting
def _nested_list(depth: int) -> list:
    x: list = []
    for _ in range(depth - 1):
        x = [x]
    return x


class TestNesting:
    @pytest.mark.parametrize(
        "data",
        [
            b"[" * 10**6 + b"]" * 10**6,
            b'{"t":[' * 10**6 + b"]}" * 10**6,
            b'{"t":' * 10**6 + b"[]" + b"}" * 10**6,
            b"[" * 10**6,
            b"[1]," * 10 + b"[" * 10**6,
        ],
        ids=["lists", "tuples", "objects", "unclosed", "after-values"],
    )
    def test_issue_frame_c_a_million_deep_is_a_wire_error(self, data):
        with pytest.raises(WireError, match="deeper"):
            decode(data)

    def test_encode_refuses_deep_values_without_recursion_error(self):
        with pytest.raises(WireError, match="deeper"):
            encode(_nested_list(10**6))
        with pytest.raises(WireError):
            encode(_nested_list(5_000), max_depth=10**6)  # past the recursion limit

    def test_a_value_that_contains_itself_is_refused(self):
        x: list = [1]
        x.append(x)
        d: dict = {}
        d["d"] = d
        for value in (x, d):
            with pytest.raises(WireError, match="deeper"):
                encode(value)

    def test_max_depth_is_the_limit(self):
        deep = _nested_list(MAX_DEPTH)
        assert _key(_roundtrip(deep)) == _key(deep)
        with pytest.raises(WireError):
            encode([deep])
        forged = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
        with pytest.raises(WireError, match="deeper"):
            decode(forged)
        assert decode(forged, max_depth=MAX_DEPTH + 1) == [_nested_list(MAX_DEPTH)]

    def test_tuples_count_one_level(self):
        value = (1,)
        for _ in range(MAX_DEPTH - 1):
            value = (value,)
        assert _key(_roundtrip(value)) == _key(value)

    def test_decoding_deep_in_the_callers_stack_is_a_wire_error(self):
        data = encode(_nested_list(MAX_DEPTH))
        depth, frame = 0, sys._getframe()
        while frame is not None:
            depth, frame = depth + 1, frame.f_back

        def dive(n: int):
            return dive(n - 1) if n else decode(data)

        with pytest.raises(WireError):
            dive(sys.getrecursionlimit() - depth - 40)


# --------------------------------------------------------------------------- garbage
_SAMPLE = encode(
    {
        "status": "ok",
        "value": {"value": (1, -2.5, {3, "x"}, frozenset({b"z"}), 2**80, 1j), "exits": [{"a": [1, None, True]}]},
        "stdout": 'say "hi", [ok]: {}',
        "duration_s": 0.001,
    }
)
_JSONISH = st.text(alphabet='[]{}",:0123456789.-+eE tsfdbicxNaIyn\\u', max_size=60)


def _decodes_or_wire_error(data) -> None:
    try:
        decode(data)
    except WireError:
        pass


class TestGarbage:
    """Truncated, random, bit-flipped or JSON-like frames raise WireError and nothing else."""

    @settings(max_examples=500, deadline=None)
    @given(st.binary(max_size=200))
    def test_random_bytes(self, data):
        _decodes_or_wire_error(data)

    @settings(max_examples=1000, deadline=None)
    @given(_JSONISH)
    def test_json_like_text(self, text):
        _decodes_or_wire_error(text.encode())
        _decodes_or_wire_error(b'{"s":[' + text.encode() + b"]}")
        _decodes_or_wire_error(b'{"d":[' + text.encode() + b"]}")

    @settings(max_examples=500, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, len(_SAMPLE) - 1), st.integers(0, 7)), min_size=1, max_size=4))
    def test_bit_flips(self, flips):
        data = bytearray(_SAMPLE)
        for pos, bit in flips:
            data[pos] ^= 1 << bit
        _decodes_or_wire_error(bytes(data))

    @settings(max_examples=300, deadline=None)
    @given(st.data())
    def test_splices_of_valid_frames(self, data):
        a = encode(data.draw(values))
        b = encode(data.draw(values))
        i = data.draw(st.integers(0, len(a)))
        j = data.draw(st.integers(0, len(b)))
        _decodes_or_wire_error(a[:i] + b[j:])

    def test_every_truncation(self):
        for n in range(len(_SAMPLE)):
            _decodes_or_wire_error(_SAMPLE[:n])
        with pytest.raises(WireError):
            decode(_SAMPLE[:-1])

    @pytest.mark.parametrize(
        "data",
        [
            b"",
            b"{}",
            b'{"x":1}',
            b'{"t":[],"t":[]}',
            b'{ "t":[]}',
            b'{"t":1}',
            b'{"d":[1]}',
            b'{"b":"!!"}',
            b'{"b":1}',
            b'{"i":"0x10"}',
            b'{"i":"FF"}',
            b'{"c":"1"}',
            b'{"c":"1 2 3"}',
            b'{"c":"a b"}',
            b'["a\\"b"]',
            b'["a\\\\"]',
            b'["a[b"]',
            b'["a,b"]',
            b'["a:b"]',
            b'["caf\xc3\xa9"]',
            b"[1] [2]",
            b"[1,]",
            b"nan",
            pickle.dumps([1, 2]),
            pickle.dumps({"status": "ok"}),
        ],
        ids=repr,
    )
    def test_invalid_frames(self, data):
        with pytest.raises(WireError):
            decode(data)

    @pytest.mark.parametrize("data", ["[1]", 1, None, [b"[1]"]], ids=repr)
    def test_a_frame_is_bytes(self, data):
        with pytest.raises(WireError, match="bytes"):
            decode(data)

    def test_bytearray_and_memoryview_frames(self):
        assert decode(bytearray(b"[1]")) == decode(memoryview(b"[1]")) == [1]


class TestIntDigits:
    def test_long_decimal_ints_are_refused_where_the_digit_limit_is_lifted(self, monkeypatch):
        monkeypatch.setattr(sys, "get_int_max_str_digits", lambda: 0)
        assert decode(b"[18446744073709551615,-18446744073709551615]") == [2**64 - 1, -(2**64) + 1]
        for digits in (b"7" * 21, b"-" + b"7" * 21, b"7" * 100_000):
            with pytest.raises(WireError, match="longer than"):
                decode(b"[" + digits + b"]")
        assert _roundtrip([2**64, -(2**200)]) == [2**64, -(2**200)]

    def test_long_decimal_ints_past_the_interpreter_limit_are_refused(self):
        with pytest.raises(WireError):
            decode(b"[" + b"7" * 5_000 + b"]")


def test_the_frame_depth_has_room_for_the_deepest_canonical_value():
    """The sandbox keeps its own copy of contra's depth limit (it imports nothing from contra)."""
    assert VALUE_MAX_DEPTH == CANONICAL_MAX_DEPTH
    assert MAX_DEPTH == CANONICAL_MAX_DEPTH + 16
