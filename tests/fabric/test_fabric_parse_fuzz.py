"""Hypothesis: parsers given random or mangled input fail only with ParseError; host scripts quote anything."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.errors import InputError, ParseError
from tensorfabric.fabric.parsers import FORMATS, parse_text
from tensorfabric.fabric.plan import host_plans
from tensorfabric.fabric.renderers import render_fabric
from tensorfabric.fabric.spec import FabricSpec, load_spec

from .fabric_io_support import DEPLOYED, SPECS

_VOCAB = [
    "nv", "set", "qos", "pfc", "default-global", "switch-priority", "mapping", "dscp", "trust", "interface", "swp1",
    "swp1-4", "link", "mtu", "congestion-control", "traffic-class", "min-threshold", "ecn", "enable", "profile",
    "pfc-watchdog", "robustness", "polling-interval", "roce", "hostname", "qos-group", "class-map", "type",
    "match-any", "policy-map", "network-qos", "queuing", "class", "c-out-8q-q3", "c-8q-nq3", "pause", "pfc-cos",
    "buffer-size", "pause-threshold", "resume-threshold", "random-detect", "minimum-threshold", "maximum-threshold",
    "bytes", "kbytes", "segments", "system", "service-policy", "input", "output", "priority-flow-control", "mode",
    "on", "off", "watch-dog-interval", "watch-dog", "interval", "uc-tx-queue", "priority", "strict", "no-drop",
    "service-profile", "Ethernet1/1-48", "Ethernet1", "mlnx_qos", "-i", "eth0", "--pfc", "--trust", "--dscp2prio",
    "set,26,3", "echo", ">", "/sys/class/net/eth0/ecn/roce_np/enable/3", "ip", "dev", "printf", "'%s\\n'",
    "NCCL_IB_TC=106", "export", "=", "3", "26", "-1", "999999999999999999999", "1e9", "0,0,0,1,0,0,0,0", "to",
    "Priority", "state:", "prio:3", "dscp:26,27,", "tc:", "6", "ratelimit:", "tsa:", "PFC", "configuration:",
    "enabled", "'", '"', "\\", "\t", "#", "!", "|",
    # Junos, Dell SONiC CLI, Cumulus datapath files and nv show output
    "class-of-service", "{", "}", ";", "[", "]", "forwarding-classes", "queue-num", "no-loss", "pfc-priority",
    "code-points", "011010", "congestion-notification-profile", "code-point", "flow-control-queue", "pfc-watchdog",
    "schedulers", "priority", "strict-high", "transmit-rate", "percent", "/*", "*/", "et-*", "unit", "*",
    "qos-map", "dscp-tc", "tc-queue", "wred-policy", "scheduler-policy", "green", "weight", "Eth1/1",
    "pfc.port_group_list", "pfc.g.cos_list", "pfc.g.port_set", "swp1-swp4", "swp49s0-swp49s3", "xon_delta",
    "ecn_red.port_group_list", "traffic.cos_3.priority_source.dscp", "priority_group.control.weight", "operational",
    "applied", "pfc-priority", "trust-mode", "enabled-tc", "146.48", "KB", "MB", "DWRR-50%", "strict-priority",
    "RoCE", "PCP/DSCP->SP", "SP->TC", "mapping", "configurations", "cumulus@leaf1:mgmt:~$",
]
_line = st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=9).map(" ".join)
_indented = st.tuples(st.sampled_from(["", "  ", "   ", "    ", "      "]), _line).map("".join)
_config = st.lists(_indented, max_size=25).map("\n".join)
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=8))
_json = st.recursive(_json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["PORT", "PORT_QOS_MAP", "DSCP_TO_TC_MAP", "QUEUE", "WRED_PROFILE", "Ethernet0",
                                     "Ethernet0|3", "pfc_enable", "wred_profile", "scheduler", "3", "26", "mtu",
                                     "BUFFER_PG", "BUFFER_PROFILE", "profile", "xoff", "PFC_WD", "GLOBAL",
                                     "dscp_to_tc_map", "CABLE_LENGTH", "SCHEDULER", "type", "weight"]),
                    inner, max_size=5)), max_leaves=20)


def _only_parse_errors(text: str, source: str, fmt: str | None = None) -> None:
    try:
        parse_text(text, source=source, fmt=fmt)
    except ParseError:
        pass


@given(st.text(max_size=400), st.sampled_from([None, *FORMATS]),
       st.sampled_from(["x", "x.json", "x.nvue", "x.eos", "x.nxos", "x.sh", "x.conf", "x.env", "x.mlnx_qos"]))
def test_random_text(text: str, fmt: str | None, source: str) -> None:
    _only_parse_errors(text, source, fmt)


@given(_config, st.sampled_from(FORMATS))
def test_random_config_words(text: str, fmt: str) -> None:
    _only_parse_errors(text, "fuzz", fmt)


_JSON_KEYS = st.sampled_from(["localhost", "asic0", "Asic0|Ethernet0", "host|Asic0|Ethernet0|3", "INTERFACE",
                              "DEVICE_METADATA", "default_pfcwd_status", "pfcwd_sw_enable", "BUFFER_QUEUE"])


@given(st.dictionaries(_JSON_KEYS, _json, max_size=4))
def test_random_multi_asic_json(value: dict[str, object]) -> None:
    _only_parse_errors(json.dumps({"asic0": value, "localhost": {"PORT": value}}), "fuzz.json", "sonic")


_HUGE = 10 * 1024 * 1024
# A 10 MB line of one hostile shape, spliced into the middle of a real fixture of that format so the parser is
# past its sniffing and deep in its grammar when it meets the line. Timing lives in benchmarks/fabric_parse.py.
_SHAPES = {"quotes": '"' * _HUGE, "words": "nv set qos " * (_HUGE // 11), "braces": "{" * _HUGE,
           "blanks": " " * _HUGE + "x"}  # blanks: what a \s* next to \s* backtracks on


@lru_cache(maxsize=1)
def _fixture_by_format() -> dict[str, str]:
    from tensorfabric.fabric.parsers import parse_deployed

    out: dict[str, str] = {}
    for folder in (DEPLOYED, DEPLOYED.parent / "dialects"):
        for path in sorted(folder.iterdir()):
            try:
                out.setdefault(parse_deployed(path).format, path.read_text())
            except ParseError:
                continue
    return out


@pytest.mark.parametrize("shape", sorted(_SHAPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_ten_megabyte_line_raises_only_parse_errors(fmt: str, shape: str) -> None:
    lines = _fixture_by_format()[fmt].splitlines()
    half = len(lines) // 2
    text = "\n".join([*lines[:half], _SHAPES[shape], *lines[half:]])
    try:
        parse_text(text, source="huge", fmt=fmt)
    except (ParseError, InputError):
        pass


@given(_json)
def test_random_json(value: object) -> None:
    _only_parse_errors(json.dumps(value), "fuzz.json", "sonic")


@lru_cache(maxsize=1)
def _corpus() -> tuple[tuple[str, str], ...]:
    rendered = [(i.filename, i.text) for i in render_fabric(load_spec(SPECS / "render-reference.yaml"))]
    captured = [(p.name, p.read_text()) for p in sorted(DEPLOYED.iterdir())]
    return tuple(rendered + captured)


@given(st.data())
def test_mangled_real_configs(data: st.DataObject) -> None:
    name, text = data.draw(st.sampled_from(_corpus()))
    lines = text.splitlines()
    for _ in range(data.draw(st.integers(1, 4))):
        if not lines:
            break
        i = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["drop", "dup", "replace", "cut", "word"]))
        if action == "drop":
            del lines[i]
        elif action == "dup":
            lines.insert(i, lines[i])
        elif action == "replace":
            lines[i] = data.draw(_indented)
        elif action == "cut":
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])))]
        else:
            words = lines[i].split(" ")
            words[data.draw(st.integers(0, len(words) - 1))] = data.draw(st.sampled_from(_VOCAB))
            lines[i] = " ".join(words)
    _only_parse_errors("\n".join(lines), name)


@lru_cache(maxsize=1)
def _reference() -> FabricSpec:
    return load_spec(SPECS / "reference.yaml")


_ENV_NAMES = st.from_regex(r"(NCCL_)?[A-Z_][A-Z0-9_]{0,20}", fullmatch=True)


@given(st.dictionaries(_ENV_NAMES, st.text(max_size=40), max_size=4), st.text(max_size=20))
def test_host_script_round_trips_any_nccl_env(env: dict[str, str], netdev: str) -> None:
    """Whatever values arrive, rendering either refuses them or writes a script that reads back the same."""
    from tensorfabric.fabric.renderers import host

    plan = host_plans(_reference())[0]
    plan = replace(plan, nccl_env=env, nics=(replace(plan.nics[0], netdev=netdev),))
    try:
        text = host.render(plan)
    except InputError:
        return
    parsed = parse_text(text, source="h.sh")
    assert dict(parsed.nccl_env) == env
    assert [p.name for p in parsed.ports] == [netdev]


@given(st.text(alphabet=" \tab'\"\\#$\n", max_size=16), st.booleans())
def test_shell_words_splits_as_shlex_does(line: str, comments: bool) -> None:
    """The linear splitter that replaced shlex (seconds on one long line) gives shlex's words and errors."""
    import shlex

    from tensorfabric.fabric.parsers._common import shell_words

    try:
        want: list[str] | None = shlex.split(line, comments=comments)
    except ValueError:
        want = None
    try:
        got: list[str] | None = shell_words(line, comments=comments)
    except ValueError:
        got = None
    assert got == want
