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
from typing import Any

from tensorfabric.errors import InputError
from tensorfabric.fabric.plan import HostPlan, NcclEnvFor, SwitchPlan, host_plans, switch_plans
from tensorfabric.fabric.renderers import eos, host, nvue, nxos, sonic
from tensorfabric.fabric.spec import FabricSpec
from tensorfabric.fsutil import write_files
from tensorfabric.registry import Registry

__all__ = ["HOST_RENDERER", "RENDERERS", "Rendered", "render_all", "render_fabric"]


@dataclass(frozen=True, slots=True)
class _Renderer:
    target: str
    extension: str
    render: Callable[..., str]
    """``render(plan)``, or ``render(plan, memo)`` where the module sets ``SHARES = True``: one ``memo`` dict is
    shared by every device of the target in one render, for what alike devices have in common."""
    shares: bool = False


def _entry(module: ModuleType) -> _Renderer:
    return _Renderer(module.TARGET, module.EXTENSION, module.render, getattr(module, "SHARES", False))


RENDERERS: Registry[_Renderer] = Registry("NOS")
"""Switch renderers by NOS name."""
for _module in (sonic, nvue, eos, nxos):
    RENDERERS.register(_module.TARGET, _entry(_module))
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
    memos: dict[str, dict[Any, Any]] = {}
    plans: list[SwitchPlan | HostPlan] = [*switch_plans(spec), *host_plans(spec, nccl_env_for)]
    for plan in plans:
        if isinstance(plan, SwitchPlan):
            if plan.nos not in RENDERERS:
                raise InputError(f"switch {plan.name!r}: no renderer for NOS {plan.nos!r}; "
                                 f"known: {', '.join(sorted(RENDERERS))}")
            renderer = RENDERERS.get(plan.nos)
        else:
            renderer = HOST_RENDERER
        text = (renderer.render(plan, memos.setdefault(renderer.target, {})) if renderer.shares
                else renderer.render(plan))
        out.append(Rendered(plan.name, renderer.target, f"{plan.name}.{renderer.extension}", text))
    return out


def _taken(directory: Path, names: list[str]) -> list[str]:
    """The ``names`` already in ``directory`` (symlinks too, dangling or not), from one listing: a stat per rendered
    file cost thousands of system calls on a large fabric. A directory that can be searched but not listed is
    asked name by name."""
    try:
        present = set(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError:
        return [name for name in names if os.path.lexists(directory / name)]
    return [name for name in names if name in present]


def render_all(spec: FabricSpec, out_dir: str | os.PathLike[str], nccl_env_for: NcclEnvFor | None = None,
               *, force: bool = False) -> list[Path]:
    """Write one configuration file per device under ``out_dir`` (created if needed); return the paths.

    Everything is rendered before the first file is written, so a spec error leaves ``out_dir`` untouched; files of
    the same name already there are replaced only with ``force`` (a symlink among them is replaced itself, never
    followed); a write that fails (disk full, read-only directory) raises InputError naming the files written and
    not written.
    Host scripts are written executable.
    """
    rendered = render_fabric(spec, nccl_env_for)
    target = Path(out_dir)
    if target.exists() and not target.is_dir():
        raise InputError(f"--out {str(target)!r} exists and is not a directory")
    taken = [] if force else _taken(target, [item.filename for item in rendered])
    if taken:
        shown = ", ".join(taken[:4]) + (f" and {len(taken) - 4} more" if len(taken) > 4 else "")
        raise InputError(f"--out {str(target)!r} already holds {shown} ({len(taken)} file(s) this render would "
                         "replace); pass --force to replace them or pick an empty directory")
    return write_files((target / item.filename, item.text, 0o755 if item.target == HOST_RENDERER.target else None)
                       for item in rendered)
