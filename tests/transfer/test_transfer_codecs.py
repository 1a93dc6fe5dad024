"""Codecs in one process: round-trip bounds (Hypothesis), layout and wire sizes, a world of one, bad input."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.errors import InputError
from tensorfabric.transfer import get_codec, init
from tensorfabric.transfer.bucket import buckets
from tensorfabric.transfer.codecs import codec_names
from tensorfabric.transfer.group import _int_env

NAMES = ("int8", "int4", "fp8", "int8o")


def _blockmax(x: torch.Tensor, block: int) -> torch.Tensor:
    return x.view(-1, block).abs().amax(dim=1).repeat_interleave(block)


@pytest.mark.parametrize("name", NAMES)
@given(values=st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=1, max_size=300),
       block=st.sampled_from([2, 8, 32, 64]))
def test_round_trip_error_within_unit_error_times_block_absmax(name: str, values: list[float], block: int) -> None:
    codec = get_codec(name, block)
    x = torch.tensor(values, dtype=torch.float32)
    x = torch.nn.functional.pad(x, (0, codec.padded(x.numel()) - x.numel()))
    data = codec.encode(x)
    assert data.dtype == torch.uint8 and data.numel() == codec.encoded_nbytes(x.numel())
    err = (codec.decode(data, x.numel()).double() - x.double()).abs()
    bound = codec.unit_error * _blockmax(x.double(), block) * (1 + 1e-6) + codec.qmax * 2.0**-126
    assert bool((err <= bound).all()), float((err - bound).max())


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", ["zeros", "constant", "outliers"])
def test_special_inputs(name: str, kind: str) -> None:
    codec = get_codec(name, 64)
    x = {"zeros": torch.zeros(256), "constant": torch.full((256,), -2.5),
         "outliers": torch.cat([torch.full((63,), 1e-3), torch.tensor([5e4])]).repeat(4)}[kind]
    y = codec.decode(codec.encode(x), 256)
    if kind != "outliers":
        assert torch.equal(y, x)  # zero scale is exact; constant blocks hit the top level exactly
    else:
        # The outlier survives; the small values drown in its scale, exactly as the bound allows.
        assert torch.allclose(y[63::64], x[63::64], rtol=codec.unit_error)
        assert float((y - x).abs().max()) <= codec.unit_error * 5e4 * (1 + 1e-6)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("block", [8, 64])
def test_a_run_of_blocks_of_one_encoding_is_byte_for_byte_the_encoding_of_those_blocks(name: str,
                                                                                       block: int) -> None:
    """The NIXL all_reduce encodes every peer's chunk in one call and sends each chunk's part of it."""
    codec = get_codec(name, block)
    x = torch.randn(24 * block, generator=torch.Generator().manual_seed(5)) * 3
    x[:block] = 0.0
    x[block:2 * block] = 1e-40  # a subnormal block: its scale would overflow the inverse, so it encodes as 0
    x[5 * block + 1] = 4e4
    whole = codec.encode(x)
    for lo, hi in ((0, 24), (0, 7), (7, 13), (23, 24)):
        part = torch.cat(codec.element_range(whole, x.numel(), lo * block, hi * block))
        assert torch.equal(part, codec.encode(x[lo * block:hi * block].clone())), (lo, hi)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "none"])
def test_the_smallest_normal_scale_is_kept_and_a_smaller_one_encodes_as_zero(name: str) -> None:
    codec = get_codec(name, 8)
    edge = codec.qmax * 2.0**-126  # absmax / qmax is exactly the smallest normal float32
    below = torch.nextafter(torch.tensor(edge), torch.tensor(0.0)).item()
    # Two values at the edge, so int8o's second largest magnitude (its scale) is at the edge too.
    x = torch.tensor([edge, -edge, edge / 2] + [0.0] * 5 + [below, -below, below / 3] + [0.0] * 5,
                     dtype=torch.float32)
    y = codec.decode(codec.encode(x), x.numel())
    assert y[0].item() == pytest.approx(edge, rel=codec.unit_error * 2, abs=0.0)
    assert y[1].item() < 0 < y[2].item()
    rest = y[8:].clone()
    if name == "int8o":  # its outlier (the last largest magnitude) travels as it is, whatever the scale
        assert rest[1].item() == -below
        rest[1] = 0.0
    assert not bool(rest.any())


def test_wire_sizes_are_payload_plus_scales() -> None:
    assert get_codec("int8", 64).encoded_nbytes(4096) == 4096 + 64 * 4
    assert get_codec("int4", 64).encoded_nbytes(4096) == 2048 + 64 * 4
    assert get_codec("fp8", 32).encoded_nbytes(4096) == 4096 + 128 * 4
    assert get_codec("none", 64).encoded_nbytes(64) == 256 + 4
    # int8o: levels, then per block a float32 scale, the float32 outlier and its one-byte index
    assert get_codec("int8o", 64).encoded_nbytes(4096) == 4096 + 64 * (4 + 4 + 1)


def test_int8o_keeps_the_neighbours_of_a_massive_activation() -> None:
    # One value of 2e4 among O(1) values, as SmolLM2's down_proj sums have: plain int8 rounds the other 63 to a
    # step of 2e4/127, int8o sends the outlier exactly and scales the rest by their own largest magnitude.
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 64, generator=gen)
    x[:, 17] = torch.tensor([2e4, -2e4, 3e3, 1.0])
    flat = x.reshape(-1)
    second = x.abs().sort(dim=1).values[:, -2:-1]
    y = get_codec("int8o", 64).decode(get_codec("int8o", 64).encode(flat), flat.numel()).view(4, 64)
    plain = get_codec("int8", 64).decode(get_codec("int8", 64).encode(flat), flat.numel()).view(4, 64)
    assert torch.equal(y[:3, 17], x[:3, 17])  # each row's largest magnitude travels exactly
    assert bool(((y - x).abs() <= second / 254 * (1 + 1e-6)).all())
    assert float((plain - x)[0].abs().max()) > 50 * float((y - x)[0].abs().max())


def test_int8o_refuses_blocks_its_index_cannot_address() -> None:
    with pytest.raises(InputError, match="256"):
        get_codec("int8o", 512)


def test_int4_packs_two_levels_per_byte_low_nibble_first() -> None:
    codec = get_codec("int4", 2)
    data = codec.encode(torch.tensor([7.0, -7.0]))
    assert data[0].item() == (7 + 8) | ((-7 + 8) << 4)


def test_codec_registry_and_bad_input() -> None:
    assert set(codec_names()) == {"int8", "int4", "fp8", "int8o", "none"}
    with pytest.raises(InputError, match="'zip' is not one of fp8, int4, int8, int8o, none"):
        get_codec("zip")
    for block in (0, 3, -2, True):
        with pytest.raises(InputError, match="even integer"):
            get_codec("int8", block)  # type: ignore[arg-type]


def test_world_of_one_is_identity_and_recorded() -> None:
    g = init(environ={})
    assert (g.size, g.rank, g.transport, g.pg) == (1, 0, "local", None)
    x = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    assert g.all_reduce(x.clone()).equal(x)
    assert g.all_gather(x).equal(x) and g.reduce_scatter(x).equal(x) and g.all_to_all(x).equal(x)
    assert g.broadcast(x.clone(), src=0).equal(x)
    assert g.all_reduce(x.clone(), async_op=True).wait().equal(x)
    y = x.clone()
    g.all_reduce(y, codec=get_codec("int8"))
    assert float((y - x).abs().max()) <= 2 * 5 / 254 + 1e-6
    assert g.stats.get("all_reduce").calls == 2 and g.stats.get("all_reduce", "int8").wire_bytes == 64 + 4
    with pytest.raises(InputError, match="send dst"):
        g.send(x, dst=0)
    with pytest.raises(InputError, match="reduce op"):
        g.all_reduce(x, op="median")
    with pytest.raises(InputError, match="float32, bfloat16 or float16"):
        g.all_reduce(torch.ones(4, dtype=torch.int64), codec=get_codec("int8"))
    assert {k: len(v.ranks) for k, v in g.mesh((1, 1)).items()} == {"pp": 1, "tp": 1}
    with pytest.raises(InputError, match="product is the group size"):
        g.mesh((2, 1))


def test_init_rejects_bad_arguments() -> None:
    with pytest.raises(InputError, match="backend"):
        init("mpi", environ={})
    with pytest.raises(InputError, match="require_transport"):
        init(environ={}, require_transport="fast")
    with pytest.raises(InputError, match="WORLD_SIZE"):
        init(environ={"WORLD_SIZE": "two"})


@given(st.text(max_size=20))
def test_env_integer_parser_raises_only_input_error(raw: str) -> None:
    try:
        _int_env({"RANK": raw}, "RANK", 0)
    except InputError:
        pass


def test_buckets_group_by_dtype_and_respect_the_size_cap() -> None:
    ts = [torch.ones(10), torch.ones(10, dtype=torch.int64), torch.ones(10), torch.ones(100)]
    bs = buckets(ts, bucket_bytes=80)
    assert [b.flat.numel() for b in bs] == [20, 100, 10]
    assert bs[0].views[1].data_ptr() == bs[0].flat[10:].data_ptr()
    with pytest.raises(InputError):
        buckets(ts, 0)


@pytest.mark.parametrize("name", NAMES)
@given(values=st.lists(st.floats(-1e4, 1e4, allow_nan=False, width=32), min_size=1, max_size=200),
       op=st.sampled_from(["sum", "avg"]))
def test_compressed_all_reduce_on_one_rank_meets_the_bound(name: str, values: list[float], op: str) -> None:
    from tensorfabric.transfer.compressed import compressed_all_reduce, error_bound_all_reduce

    g = init(environ={})
    codec = get_codec(name, 16)
    x = torch.tensor(values, dtype=torch.float32)
    t = x.clone()
    wire = compressed_all_reduce(g.comm, t, codec, op, segment_elems=32)  # several pipeline segments
    bound = error_bound_all_reduce([x], codec, 1, op=op) + codec.qmax * 2.0**-126
    assert bool(((t.double() - x.double()).abs() <= bound).all())
    assert wire == codec.encoded_nbytes(codec.padded(x.numel()))
