"""Block-wise quantization codecs for compressed collectives, selected by name.

Each codec lives in its own module and registers itself here; :func:`get_codec` is the only lookup. A codec
turns a flat float32 tensor whose length is a multiple of its block into one flat ``uint8`` buffer laid out as
``[payload | scales]`` -- payload first (``bits`` per element), then one float32 scale per block -- so a single
collective moves both, and the wire size is exactly ``encoded_nbytes(numel)``.

Error model: for an element in a block whose largest magnitude is ``M``, ``|decode(encode(x)) - x| <= u * M``
where ``u = codec.unit_error`` (int8 1/254, int4 1/14, fp8-e4m3 1/16 + 2**-19/448, none 0). Blocks whose
scale ``M/qmax`` falls below the smallest float32 normal (``M < qmax * 2**-126``, about 1e-36) encode as zero,
so their error is ``M`` itself -- an absolute floor of ``qmax * 2**-126`` that only denormal data ever meets.
NaN and infinity are not supported (a block holding one decodes to NaN). The derivations
are in each codec's docstring; the collective bounds built on them are in
:mod:`tensorfabric.transfer.compressed`.
"""

from __future__ import annotations

from collections.abc import Callable

from tensorfabric.errors import InputError
from tensorfabric.registry import Registry
from tensorfabric.transfer.codecs.base import BlockCodec

__all__ = ["BlockCodec", "CODECS", "codec_names", "get_codec", "register"]

# Importing a codec module registers it; done on first lookup so that `import tensorfabric.transfer` stays cheap.
CODECS: Registry[Callable[[int], BlockCodec]] = Registry(
    "codec", modules=tuple(f"{__name__}.{m}" for m in ("fp8", "int4", "int8", "int8o", "none")))
register = CODECS.register


def codec_names() -> list[str]:
    return sorted(CODECS.names())


def get_codec(name: str, block: int = 64) -> BlockCodec:
    """The codec called ``name`` (``int8``, ``int4``, ``fp8``, ``none``) with ``block`` elements per scale."""
    factory = CODECS.get(name)
    if isinstance(block, bool) or not isinstance(block, int) or block < 2 or block % 2:
        raise InputError(f"codec block: {block!r} must be an even integer >= 2 such as 32, 64 or 128")
    return factory(block)
