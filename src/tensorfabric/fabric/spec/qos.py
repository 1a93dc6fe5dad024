"""The QoS part of the fabric spec: the fabric-wide plan and the per-device overrides.

Defaults follow the NVIDIA/AMD/Cisco RoCEv2 recipe (lossless-config.md §1), whose numbers live in ``roce.py``:
RoCE DSCP 26 on priority 3 (PFC), CNP DSCP 48 on priority 6 in a strict queue, trust DSCP, ECN 150 KB / 1.5 MB /
100 %, ETS 50/50 between priority 0 and 3, PFC watchdog drop at 200 ms, NCCL traffic class 106 (= 26 << 2 with ECT(0)).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from tensorfabric.fabric.spec.types import Dscp, Mtu, Percent, Priority, Size, SpecModel, Speed, Text
from tensorfabric.roce import (
    CNP_DSCP,
    CNP_PRIORITY,
    ECN_KMAX_BYTES,
    ECN_KMIN_BYTES,
    ECN_PMAX_PERCENT,
    LOSSLESS_PRIORITY,
    PFCWD_DETECTION_MS,
    PFCWD_POLL_MS,
    PFCWD_RESTORATION_MS,
    ROCE_DSCP,
    ROCE_UDP_PORT,
    traffic_class,
)

__all__ = [
    "ClassifierPlan",
    "CnpClass",
    "DcbxSetting",
    "EcnProfile",
    "EtsPlan",
    "MtuPlan",
    "NcclPlan",
    "NicQos",
    "QosPlan",
    "RoceClass",
    "SwitchQos",
    "Trust",
    "WatchdogPlan",
]

Trust = Literal["dscp", "pcp"]


class RoceClass(SpecModel):
    dscp: tuple[Dscp, ...] = Field(default=(ROCE_DSCP,), min_length=1)
    priority: Priority = LOSSLESS_PRIORITY

    @field_validator("dscp", mode="before")
    @classmethod
    def _one(cls, value: object) -> object:
        return [value] if isinstance(value, int) else value


class CnpClass(SpecModel):
    dscp: Dscp = CNP_DSCP
    priority: Priority = CNP_PRIORITY
    strict: bool = True


class EcnProfile(SpecModel):
    """ECN marking on the RoCE egress queue: mark from ``kmin`` up to ``kmax`` bytes, probability ``pmax`` %."""

    speed_bps: Speed | None = Field(default=None, alias="speed")
    """Applies to ports of this speed; the profile without a speed is the default."""
    kmin: Size = ECN_KMIN_BYTES
    kmax: Size = ECN_KMAX_BYTES
    pmax: Percent = ECN_PMAX_PERCENT


class EtsPlan(SpecModel):
    weights: dict[Priority, Percent] = Field(default_factory=lambda: {0: 50, LOSSLESS_PRIORITY: 50})

    @model_validator(mode="after")
    def _sum(self) -> EtsPlan:
        total = sum(self.weights.values())
        if self.weights and total != 100:
            raise ValueError(f"ETS weights {dict(self.weights)} add up to {total}; they must add up to 100")
        return self


class MtuPlan(SpecModel):
    host: Mtu = 9000
    switch: Mtu = 9216


class WatchdogPlan(SpecModel):
    enabled: bool = True
    detection_ms: int = Field(default=PFCWD_DETECTION_MS, ge=1, le=60_000)
    restoration_ms: int = Field(default=PFCWD_RESTORATION_MS, ge=1, le=60_000)
    poll_ms: int = Field(default=PFCWD_POLL_MS, ge=1, le=60_000)
    action: Literal["drop", "forward", "alert"] = "drop"


class ClassifierPlan(SpecModel):
    """How switches recognise RoCE: by DSCP (the maps) or additionally by an ingress ACL on UDP 4791."""

    kind: Literal["dscp", "acl"] = "dscp"
    acl_name: str = Field(default="ROCE_ACL", pattern=r"^[A-Za-z0-9_.-]+$")
    udp_port: int = Field(default=ROCE_UDP_PORT, ge=1, le=65535)


class NcclPlan(SpecModel):
    tc: int | None = Field(default=None, ge=0, le=255)
    """NCCL_IB_TC; ``None`` = the RoCE DSCP << 2 with ECT(0) (106 for DSCP 26)."""
    gid_index: int | None = Field(default=None, ge=0, le=255)
    sl: int | None = Field(default=None, ge=0, le=15)
    """NCCL_IB_SL; with PCP trust its low 3 bits are the packet's priority."""
    ib_hca: Text | None = None
    cross_nic: Literal[0, 1, 2] | None = None


class DcbxSetting(SpecModel):
    owner: Literal["os", "firmware"] = "os"
    willing: bool = False


class QosPlan(SpecModel):
    roce: RoceClass = RoceClass()
    cnp: CnpClass = CnpClass()
    lossless_priorities: tuple[Priority, ...] = Field(default=(LOSSLESS_PRIORITY,), min_length=1)
    trust: Trust = "dscp"
    dscp_map: dict[Dscp, Priority] = Field(default_factory=dict)
    """Extra DSCP -> priority entries; RoCE and CNP DSCPs are added from their classes, others go to 0."""
    ecn: tuple[EcnProfile, ...] = (EcnProfile(),)
    ets: EtsPlan = EtsPlan()
    mtu: MtuPlan = MtuPlan()
    watchdog: WatchdogPlan = WatchdogPlan()
    nic_storm_prevention_ms: int | None = Field(default=100, ge=80, le=8000)
    """mlx5 pfc-prevention-tout (80..8000 ms); None = not set."""
    classifier: ClassifierPlan = ClassifierPlan()
    nccl: NcclPlan = NcclPlan()
    dcbx: DcbxSetting = DcbxSetting()

    def dscp_to_priority(self) -> dict[int, int]:
        table = dict(self.dscp_map)
        table.update({d: self.roce.priority for d in self.roce.dscp})
        table[self.cnp.dscp] = self.cnp.priority
        return table

    def ecn_for(self, speed_bps: float | None) -> EcnProfile:
        for profile in self.ecn:
            if profile.speed_bps is not None and speed_bps is not None and abs(profile.speed_bps - speed_bps) < 1:
                return profile
        default = next((p for p in self.ecn if p.speed_bps is None), None)
        return default or (self.ecn[0] if self.ecn else EcnProfile())

    def nccl_tc(self, nccl: NcclPlan | None = None) -> int:
        chosen = nccl or self.nccl
        return chosen.tc if chosen.tc is not None else traffic_class(self.roce.dscp[0])

    def nccl_env(self, nccl: NcclPlan | None = None) -> dict[str, str]:
        """The NCCL variables the plan pins: always NCCL_IB_TC, the others only where the spec sets them.

        The one definition that host scripts (what is rendered) and the linter (what the spec intends) share.
        """
        chosen = nccl or self.nccl
        env = {"NCCL_IB_TC": str(self.nccl_tc(chosen))}
        for name, value in (("NCCL_IB_GID_INDEX", chosen.gid_index), ("NCCL_IB_HCA", chosen.ib_hca),
                            ("NCCL_IB_SL", chosen.sl), ("NCCL_CROSS_NIC", chosen.cross_nic)):
            if value is not None:
                env[name] = str(value)
        return env


class SwitchQos(SpecModel):
    """What one switch does differently from the plan (each field ``None`` = as planned)."""

    dscp_map: dict[Dscp, Priority] | None = None
    """Entries merged over the plan's DSCP table."""
    pfc_priorities: tuple[Priority, ...] | None = None
    trust: Trust | None = None
    strict_priorities: tuple[Priority, ...] | None = None
    ecn: EcnProfile | None = None
    ecn_enabled: bool | None = None
    link_pause: bool | None = None
    watchdog: WatchdogPlan | None = None
    mtu: Mtu | None = None


class NicQos(SpecModel):
    """What one NIC does differently from the plan (each field ``None`` = as planned)."""

    dscp_map: dict[Dscp, Priority] | None = None
    pfc_priorities: tuple[Priority, ...] | None = None
    trust: Trust | None = None
    cnp_dscp: Dscp | None = None
    cnp_priority: Priority | None = None
    ecn_enabled: bool | None = None
    link_pause: bool | None = None
    storm_prevention_ms: int | None = Field(default=None, ge=0, le=8000)
    """0 = explicitly off."""
    dcbx: DcbxSetting | None = None
    mtu: Mtu | None = None
