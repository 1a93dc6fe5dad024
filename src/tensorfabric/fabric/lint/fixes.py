"""A finding's fix in the syntax of the config it was found in.

An operator who pasted an NX-OS config should be handed NX-OS lines, not "enable ECN on queue 3". Each action has
one template per dialect (``Deployed.format``), written as the vendor's own guides spell the statement, with the
recipe's values from :mod:`tensorfabric.roce`; a dialect without a template (a spec, a format added later) gets
the generic sentence. ``<port>`` stands where the statement needs a port the finding does not name.
"""

from __future__ import annotations

from tensorfabric import roce

__all__ = ["dscp_map", "ecn_on_queue", "mtu", "no_egress_rewrite", "strict_queue", "watchdog", "watchdog_drop"]

_KMIN, _KMAX, _PMAX = roce.ECN_KMIN_BYTES, roce.ECN_KMAX_BYTES, roce.ECN_PMAX_PERCENT
_DET, _RES, _POLL = roce.PFCWD_DETECTION_MS, roce.PFCWD_RESTORATION_MS, roce.PFCWD_POLL_MS


def _pick(fmt: str, templates: dict[str, str], generic: str) -> str:
    return templates.get(fmt, generic)


def ecn_on_queue(fmt: str, queue: int) -> str:
    q = queue
    return _pick(fmt, {
        "sonic": f'QUEUE "<port>|{q}": {{"wred_profile": "ROCE_ECN"}} with WRED_PROFILE "ROCE_ECN": {{"ecn": '
                 f'"ecn_all", "wred_green_enable": "true", "green_min_threshold": "{_KMIN}", '
                 f'"green_max_threshold": "{_KMAX}", "green_drop_probability": "{_PMAX:g}"}}',
        "eos": f"tx-queue {q} / random-detect ecn minimum-threshold {_KMIN // 1000} kbytes maximum-threshold "
               f"{_KMAX // 1000} kbytes max-mark-probability {_PMAX:g} (in the qos profile or interface)",
        "nxos": f"policy-map type queuing <policy> / class type queuing c-out-8q-q{q} / random-detect "
                f"minimum-threshold {_KMIN // 1000} kbytes maximum-threshold {_KMAX // 1000} kbytes drop-probability "
                f"{_PMAX:g} weight 0 ecn",
        "dell-sonic": f"qos wred-policy ROCE / green minimum-threshold {_KMIN // 1000} maximum-threshold "
                      f"{_KMAX // 1000} drop-probability {_PMAX:g} / ecn green; then under the interface: queue {q} "
                      "wred-policy ROCE",
        "nvue": f"nv set qos congestion-control default-global traffic-class {q} ecn enable; min-threshold "
                f"{_KMIN // 1000}KB; max-threshold {_KMAX // 1000}KB; probability {_PMAX:g}",
        "nvue-show": f"nv set qos congestion-control default-global traffic-class {q} ecn enable",
        "avd": f"qos_profiles: - uc_tx_queues: - id: {q}, random_detect: {{ecn: {{threshold: {{units: kbytes, min: "
               f"{_KMIN // 1000}, max: {_KMAX // 1000}, max_probability: {_PMAX:g}}}}}}}",
        "cumulus-datapath": f"ecn_red.port_group_list = [ecn_red_group]; ecn_red.ecn_red_group.cos_list = [{q}]; "
                            f"ecn_red.ecn_red_group.min_threshold_bytes = {_KMIN}; "
                            f"ecn_red.ecn_red_group.max_threshold_bytes = {_KMAX}",
        "junos": f"set class-of-service schedulers <scheduler of queue {q}> explicit-congestion-notification",
        "dell-os10": f"wred ROCE_ECN / random-detect color green minimum-threshold {_KMIN // 1000} maximum-threshold "
                     f"{_KMAX // 1000} drop-probability {_PMAX:g} / random-detect ecn; then policy-map type queuing "
                     f"<policy> / class <class-map type queuing with match queue {q}> / random-detect ROCE_ECN",
        "onyx": f"interface ethernet <port> traffic-class {q} congestion-control ecn minimum-absolute "
                f"{_KMIN // 1000} maximum-absolute {_KMAX // 1000}",
    }, f"enable ECN on queue {q} (Kmin {_KMIN} B, Kmax {_KMAX} B, Pmax {_PMAX:g} %)")


def strict_queue(fmt: str, queue: int) -> str:
    q = queue
    return _pick(fmt, {
        "sonic": f'SCHEDULER "scheduler.strict": {{"type": "STRICT"}} and QUEUE "<port>|{q}": '
                 '{"scheduler": "scheduler.strict"}',
        "eos": f"tx-queue {q} / priority strict (and no bandwidth percent)",
        "avd": f"qos_profiles: - uc_tx_queues: - id: {q}, priority: priority strict (and no bandwidth_percent)",
        "nxos": f"policy-map type queuing <policy> / class type queuing c-out-8q-q{q} / priority level 1",
        "dell-sonic": f"qos scheduler-policy ROCE / queue {q} / type strict",
        "nvue": f"nv set qos egress-scheduler default-global traffic-class {q} mode strict",
        "nvue-show": f"nv set qos egress-scheduler default-global traffic-class {q} mode strict",
        "cumulus-datapath": "priority_group.<group of the CNP class>.weight = 0 (strict)",
        "junos": "set class-of-service schedulers <CNP scheduler> priority strict-high",
        "dell-os10": f"policy-map type queuing <policy> / class <class-map type queuing with match queue {q}> / "
                     "priority (and no bandwidth percent)",
        "onyx": f"interface ethernet <port> traffic-class {q} dcb ets strict",
    }, f"schedule queue {q} strict priority")


def watchdog(fmt: str) -> str:
    return _pick(fmt, {
        "sonic": f'PFC_WD "<port>": {{"action": "{roce.PFCWD_ACTION}", "detection_time": "{_DET}", '
                 f'"restoration_time": "{_RES}"}} and PFC_WD "GLOBAL": {{"POLL_INTERVAL": "{_POLL}"}}',
        "eos": f"priority-flow-control pause watchdog default timeout {_DET / 1000:g} / ... default recovery-time "
               f"{_RES / 1000:g} / ... default polling-interval {_POLL / 1000:g} / ... action "
               f"{roce.PFCWD_ACTION}, and 'priority-flow-control pause watchdog' under each lossless interface",
        "nxos": f"priority-flow-control watch-dog-interval on / priority-flow-control watch-dog interval {_POLL} / "
                f"priority-flow-control watch-dog shutdown-multiplier {max(1, _DET // _POLL)} / "
                f"priority-flow-control auto-restore multiplier {max(1, _RES // _POLL)}",
        "dell-sonic": f"priority-flow-control watchdog polling-interval {_POLL}; under each lossless interface: "
                      f"priority-flow-control watchdog on / ... action {roce.PFCWD_ACTION} / ... detect-time {_DET} "
                      f"/ ... restore-time {_RES}",
        "nvue": f"nv set interface <port> qos pfc-watchdog; nv set qos pfc-watchdog polling-interval {_POLL}; "
                f"nv set qos pfc-watchdog robustness {max(1, _DET // _POLL)}",
        "nvue-show": f"nv set interface <port> qos pfc-watchdog; nv set qos pfc-watchdog polling-interval {_POLL}",
        "cumulus-datapath": "pfc_watchdog.port_group_list = [pfc_wd_port_group]; "
                            "pfc_watchdog.pfc_wd_port_group.port_set = <ports> (qos_features.conf); "
                            f"pfc_wd.poll_interval = {_POLL}, pfc_wd.robustness = {max(1, _DET // _POLL)} "
                            "(/etc/cumulus/switchd.conf)",
        "junos": "set class-of-service congestion-notification-profile <cnp> pfc-watchdog (watchdog-action drop)",
        "onyx": "interface ethernet <port> pfc-wd",
        "avd": f"qos_profiles: - priority_flow_control: watchdog: {{enabled: true, action: {roce.PFCWD_ACTION}, timer: "
               f"{{timeout: '{_DET / 1000:g}', polling_interval: '{_POLL / 1000:g}', recovery_time: "
               f"'{_RES / 1000:g}'}}}}",
    }, f"configure the PFC watchdog ({roce.PFCWD_ACTION}, {_DET} ms detection / {_RES} ms restoration, "
       f"{_POLL} ms poll)")


def watchdog_drop(fmt: str) -> str:
    return _pick(fmt, {
        "sonic": f'PFC_WD "<port>": {{"action": "{roce.PFCWD_ACTION}"}}',
        "eos": f"priority-flow-control pause watchdog action {roce.PFCWD_ACTION}",
        "avd": f"qos_profiles: - priority_flow_control: watchdog: action: {roce.PFCWD_ACTION}",
        "dell-sonic": f"priority-flow-control watchdog action {roce.PFCWD_ACTION} (under each lossless interface)",
    }, f"set the PFC watchdog action to {roce.PFCWD_ACTION}")


def mtu(fmt: str, port: str, value: int) -> str:
    return _pick(fmt, {
        "sonic": f'PORT "{port}": {{"mtu": "{value}"}}',
        "eos": f"interface {port} / mtu {value}",
        "avd": f"ethernet_interfaces: - name: {port}, mtu: {value}",
        "nxos": f"policy-map type network-qos <policy> / class type network-qos <lossless class> / mtu {value} "
                f"(and mtu {value} under interface {port})",
        "dell-sonic": f"interface {port} / mtu {value}",
        "nvue": f"nv set interface {port} link mtu {value}",
        "nvue-show": f"nv set interface {port} link mtu {value}",
        "cumulus-datapath": f"mtu {value} under iface {port} in /etc/network/interfaces",
        "junos": f"set interfaces {port} mtu {value}",
        "dell-os10": f"interface {port} / mtu {value}",
        "onyx": f"interface ethernet {port.removeprefix('Ethernet')} mtu {value} force",
        "host-script": f"ip link set {port} mtu {value}",
        "mlnx_qos": f"ip link set {port} mtu {value}",
    }, f"set MTU {value} on {port}")


def dscp_map(fmt: str, dscp: int, priority: int) -> str:
    d, p = dscp, priority
    return _pick(fmt, {
        "sonic": f'DSCP_TO_TC_MAP "<map>": {{"{d}": "{p}"}}',
        "eos": f"qos map dscp {d} to traffic-class {p}",
        "avd": f'qos: map: dscp: ["{d} to traffic-class {p}"]',
        "nxos": f"class-map type qos match-any <class> / match dscp {d}, in a class whose policy-map type qos sets "
                f"qos-group {p}",
        "dell-sonic": f"qos map dscp-tc <map> / dscp {d} traffic-class {p}",
        "nvue": f"nv set qos mapping default-global dscp {d} switch-priority {p}",
        "nvue-show": f"nv set qos mapping default-global dscp {d} switch-priority {p}",
        "cumulus-datapath": f"traffic.cos_{p}.priority_source.dscp = [{d}]",
        "junos": f"set class-of-service classifiers dscp <classifier> forwarding-class <class of priority {p}> "
                 f"loss-priority low code-points {d:06b}",
        "dell-os10": f"trust dscp-map <map> / qos-group {p} dscp {d} (applied by system qos / trust-map dscp <map>)",
        "host-script": f"mlnx_qos -i <netdev> --dscp2prio set,{d},{p}",
        "mlnx_qos": f"mlnx_qos -i <netdev> --dscp2prio set,{d},{p}",
    }, f"map DSCP {d} to priority {p}")


def no_egress_rewrite(fmt: str, priority: int, dscp: int) -> str:
    return _pick(fmt, {
        "eos": f"no qos map traffic-class {priority} to dscp {dscp}",
        "avd": f'remove "{priority} to dscp {dscp}" from qos: map: traffic_class',
        "sonic": f'remove the TC_TO_DSCP_MAP entry "{priority}": "{dscp}" (or its PORT_QOS_MAP binding)',
        "nxos": "remove 'set dscp' from the class of the RoCE qos-group in the egress policy",
    }, f"stop rewriting the DSCP of priority {priority} (to {dscp}) on egress")
