"""PFC headroom: the models (:mod:`.model`), the vendor-calibrated ASIC presets (:mod:`.presets`), a vendor's own
``pg_profile_lookup.ini`` answered exactly (:mod:`.table`) and the per-model questions the CLI asks (:mod:`.query`).

The rest of the code imports from here; the submodules import each other by their own names, so that this file is
never in an import circle with them.
"""

from __future__ import annotations

from tensorfabric.fabric.headroom.model import (
    ASICS,
    MODELS,
    PAUSE_QUANTA,
    AsicBuffer,
    HeadroomResult,
    HeadroomTerm,
    ModelName,
    asic_named,
    compute_headroom,
    default_lanes,
    headroom_for_link,
    headroom_for_port,
    headroom_from_table,
    least_switch_headroom,
)
from tensorfabric.fabric.headroom.presets import (
    CALIBRATION_MTU,
    PRESETS,
    AsicPreset,
    CalibrationTable,
    PresetAnswer,
    preset_headroom,
    preset_named,
)
from tensorfabric.fabric.headroom.query import (
    HeadroomQuery,
    PortHeadroom,
    answer,
    asic_names,
    model_options,
    spec_headroom,
)
from tensorfabric.fabric.headroom.table import HeadroomTable, TableRow, load_table, lookup, parse_table

__all__ = [
    "ASICS",
    "CALIBRATION_MTU",
    "MODELS",
    "PAUSE_QUANTA",
    "PRESETS",
    "AsicBuffer",
    "AsicPreset",
    "CalibrationTable",
    "HeadroomQuery",
    "HeadroomResult",
    "HeadroomTable",
    "HeadroomTerm",
    "ModelName",
    "PortHeadroom",
    "PresetAnswer",
    "TableRow",
    "answer",
    "asic_named",
    "asic_names",
    "compute_headroom",
    "default_lanes",
    "headroom_for_link",
    "headroom_for_port",
    "headroom_from_table",
    "least_switch_headroom",
    "load_table",
    "lookup",
    "model_options",
    "parse_table",
    "preset_headroom",
    "preset_named",
    "spec_headroom",
]
