"""fp8-e4m3 (``torch.float8_e4m3fn``): values scaled so the block absmax ``M`` maps to 448, the largest finite
e4m3 value, then rounded to nearest-even in e4m3; one float32 scale ``M/448`` per block.

Error: e4m3 has 3 mantissa bits, so a normal value ``v`` rounds within ``|v| * 2**-4``; below the smallest
normal (``2**-6``) the spacing is ``2**-9`` and the error at most ``2**-10``. In scaled units ``|v| <= 448``, so
``|err| <= (M/448) * max(448 * 2**-4, 2**-10) <= M * (1/16 + 2**-10/448)`` -- ``unit_error = 1/16 + 2**-19/448``
is a safe upper bound (the relative part dominates). Wire: 1 byte per element + 4 bytes per block.

Registered only when torch has ``float8_e4m3fn`` (torch >= 2.1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tensorfabric.transfer.codecs import register
from tensorfabric.transfer.codecs.base import BlockCodec

if TYPE_CHECKING:
    import torch

_E4M3_MAX = 448.0


class Fp8Codec(BlockCodec):
    name: ClassVar[str] = "fp8"
    bits: ClassVar[int] = 8
    qmax: ClassVar[float] = _E4M3_MAX
    unit_error: ClassVar[float] = 1.0 / 16.0 + 2.0**-10 / _E4M3_MAX

    def _quantize_into(self, scaled: torch.Tensor, payload: torch.Tensor) -> None:
        import torch

        # Clamp: e4m3fn has no infinity, and a value rounding past 448 would become NaN.
        payload.view(torch.float8_e4m3fn).copy_(scaled.clamp_(-_E4M3_MAX, _E4M3_MAX).reshape(-1))

    def _levels(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        import torch

        return payload.view(torch.float8_e4m3fn).to(torch.float32)


def _supported() -> bool:
    import torch

    return hasattr(torch, "float8_e4m3fn")


if _supported():
    register("fp8", Fp8Codec)
