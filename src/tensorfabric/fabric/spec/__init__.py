"""The fabric spec: switches, hosts with NICs, links and one QoS plan for the whole lossless fabric.

The public surface; the rest of the code imports from here. The room holds the records (:mod:`.model`), their field
types (:mod:`.types`), the QoS plan (:mod:`.qos`), the ASIC buffer model (:mod:`.asic`) and the loader
(:mod:`.load`: YAML text to a validated :class:`FabricSpec`, errors naming the field path). The submodules import
each other by their own names, never this file, so that it is in no import circle with them.
"""

from __future__ import annotations

from tensorfabric.fabric.spec.asic import AsicSpec
from tensorfabric.fabric.spec.load import load_spec, parse_spec
from tensorfabric.fabric.spec.model import (
    NOS_NAMES,
    FabricSpec,
    HostSpec,
    LinkSpec,
    NicSpec,
    SwitchPortSpec,
    SwitchSpec,
)
from tensorfabric.fabric.spec.qos import CnpClass, EcnProfile, NcclPlan, NicQos, QosPlan, RoceClass, SwitchQos

__all__ = [
    "NOS_NAMES",
    "AsicSpec",
    "CnpClass",
    "EcnProfile",
    "FabricSpec",
    "HostSpec",
    "LinkSpec",
    "NcclPlan",
    "NicQos",
    "NicSpec",
    "QosPlan",
    "RoceClass",
    "SwitchPortSpec",
    "SwitchQos",
    "SwitchSpec",
    "load_spec",
    "parse_spec",
]
