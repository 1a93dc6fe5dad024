"""Renderers: one module per target, selected by a switch's ``nos`` (or ``host``) from a registry.

``render_all(spec, out_dir)`` writes one file per device, atomically, named ``<device>.<extension>``:

==========  ======================================  =========
target      what                                    extension
==========  ======================================  =========
``sonic``   config_db.json fragment                 .json
``cumulus`` NVUE ``nv set`` commands                .nvue
``eos``     Arista EOS configuration                .eos
``nxos``    Cisco NX-OS configuration               .nxos
``host``    bash script (mlnx_qos, sysfs, NCCL)     .sh
==========  ======================================  =========

Every file parses back through :func:`tensorfabric.fabric.parsers.parse_deployed` to the plan it came from.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from tensorfabric.errors import InputError
from tensorfabric.fabric.renderers import eos, host, nvue, nxos, sonic
from tensorfabric.fabric.renderers.plan import HostPlan, NcclEnvFor, SwitchPlan, host_plans, switch_plans
from tensorfabric.fabric.spec import FabricSpec
from tensorfabric.fsutil import atomic_write_many

__all__ = ["HOST_RENDERER", "RENDERERS", "Rendered", "render_all", "render_fabric"]


@dataclass(frozen=True, slots=True)
class _Renderer:
    target: str
    extension: str
    render: Callable[..., str]


def _entry(module: ModuleType) -> _Renderer:
    return _Renderer(module.TARGET, module.EXTENSION, module.render)


RENDERERS: dict[str, _Renderer] = {r.target: r for r in map(_entry, (sonic, nvue, eos, nxos))}
"""Switch renderers by NOS name."""
HOST_RENDERER = _entry(host)


@dataclass(frozen=True, slots=True)
class Rendered:
    device: str
    target: str
    filename: str
    text: str


def render_fabric(spec: FabricSpec, nccl_env_for: NcclEnvFor | None = None) -> list[Rendered]:
    """Render every device in memory, switches first, in spec order."""
    out: list[Rendered] = []
    plans: list[SwitchPlan | HostPlan] = [*switch_plans(spec), *host_plans(spec, nccl_env_for)]
    for plan in plans:
        if isinstance(plan, SwitchPlan):
            renderer = RENDERERS.get(plan.nos)
            if renderer is None:
                raise InputError(f"switch {plan.name!r}: no renderer for NOS {plan.nos!r}; "
                                 f"known: {', '.join(sorted(RENDERERS))}")
        else:
            renderer = HOST_RENDERER
        out.append(Rendered(plan.name, renderer.target, f"{plan.name}.{renderer.extension}", renderer.render(plan)))
    return out


def render_all(spec: FabricSpec, out_dir: str | os.PathLike[str], nccl_env_for: NcclEnvFor | None = None,
               ) -> list[Path]:
    """Write one configuration file per device under ``out_dir`` (created if needed); return the paths.

    Everything is rendered before the first file is written, so a spec error leaves ``out_dir`` untouched.
    Host scripts are written executable.
    """
    rendered = render_fabric(spec, nccl_env_for)
    target = Path(out_dir)
    if target.exists() and not target.is_dir():
        raise InputError(f"--out {str(target)!r} exists and is not a directory")
    return atomic_write_many([(target / item.filename, item.text.encode("utf-8"),
                               0o755 if item.target == HOST_RENDERER.target else 0o644) for item in rendered])
