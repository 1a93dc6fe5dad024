"""A host script's NCCL variables are read by the one NAME=value reader (host/nccl_conf.py): ``export`` as the shell
does, lines printf writes into a ``*.conf`` as NCCL does. Shapes from published scripts
(docs/formats.md, "NCCL variables in host scripts"); hosts, devices and values changed."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings

from metamorphic import mutations
from tensorfabric.fabric.parsers import parse_text
from tensorfabric.host.nccl_conf import read_env_file

# MLPerf-style config_common.sh: one export over continuation lines, one value quoted with a leading '='.
MULTI = """\
#!/bin/bash
export OMPI_MCA_btl_tcp_if_include="10.40.0.0/12"
export PMIX_MCA_gds="^ds12" \\
      NCCL_SOCKET_NTHREADS=8 \\
      NCCL_DEBUG=WARN \\
      NCCL_IB_GID_INDEX=3 \\
      NCCL_IB_TC=106 \\
      NCCL_IB_HCA='=mlx5_1,mlx5_2,mlx5_7'
"""

# A defaults-then-run wrapper: variables set in if-blocks, exports chained with && into the benchmark.
CHAINED = """\
#!/bin/bash
if [ "x$NCCL_IB_HCAS" = "x" ]; then
\tNCCL_IB_HCAS=mlx5_0,mlx5_1,mlx5_4,mlx5_5
fi
if [ "x$GID" = "x" ]; then
\tGID=3
fi
export NCCL_IB_HCA=$NCCL_IB_HCAS && \\
  export NCCL_IB_GID_INDEX=$GID && \\
  export NCCL_IB_CUDA_SUPPORT=1 && \\
  /opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2
"""

# A prepare.sh that picks the HCAs with a command substitution: the value is whatever runs there.
SUBSTITUTED = """\
#!/bin/bash -e
export NCCL_IB_GID_INDEX=3  # RoCE v2
export NCCL_IB_TC=106
export NCCL_IB_HCA=$(ls /sys/class/infiniband | grep mlx5 | paste -sd,)
"""

# printf into nccl.conf: NCCL reads each line literally and keeps a name's first value.
CONF = """\
#!/bin/bash
printf '%s\\n' 'NCCL_IB_HCA="=mlx5_0,mlx5_1"' 'NCCL_IB_TC = 106' 'NCCL_IB_GID_INDEX=3' 'NCCL_IB_GID_INDEX=5' \\
  > /etc/nccl.conf
printf '%s\\n' "export GLOO_SOCKET_IFNAME='ens1f0np0'" 'export NCCL_X=$HOME' > /etc/profile.d/nccl.sh
"""


@pytest.mark.parametrize(("text", "env", "warned"), [
    (MULTI, {"OMPI_MCA_btl_tcp_if_include": "10.40.0.0/12", "PMIX_MCA_gds": "^ds12", "NCCL_SOCKET_NTHREADS": "8",
             "NCCL_DEBUG": "WARN", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106",
             "NCCL_IB_HCA": "=mlx5_1,mlx5_2,mlx5_7"}, []),
    (CHAINED, {"NCCL_IB_HCA": "mlx5_0,mlx5_1,mlx5_4,mlx5_5", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_CUDA_SUPPORT": "1"},
     []),
    (SUBSTITUTED, {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"},
     ["line 4: value of NCCL_IB_HCA is a shell expansion"]),
    (CONF, {"NCCL_IB_HCA": '"=mlx5_0,mlx5_1"', "NCCL_IB_GID_INDEX": "3", "GLOO_SOCKET_IFNAME": "ens1f0np0"},
     ["line 2: /etc/nccl.conf: NCCL reads .conf values literally: the quotes",
      "line 2: /etc/nccl.conf: NCCL reads .conf files literally: this sets 'NCCL_IB_TC '",
      "line 2: /etc/nccl.conf: NCCL_IB_GID_INDEX is set again; NCCL keeps the first value",
      "line 4: /etc/profile.d/nccl.sh: value of NCCL_X is a shell expansion"]),
], ids=["multi-export", "chained", "substituted", "printf-conf"])
def test_script_variables_are_read_as_their_reader_reads_them(text: str, env: dict[str, str],
                                                              warned: list[str]) -> None:
    d = parse_text(text, source="host1.sh")
    assert dict(d.nccl_env) == env
    assert d.read is not None
    for start in warned:
        assert any(w.startswith(start) for w in d.read.warnings), (start, d.read.warnings)
    assert len(d.read.warnings) == len(warned), d.read.warnings


def test_a_bash_x_trace_of_exports_reads_the_same() -> None:
    trace = "#!/bin/bash\n+ export NCCL_SOCKET_IFNAME==ens1f0np0\n+ export 'NCCL_IB_HCA==mlx5_0:1 '\n"
    assert dict(parse_text(trace, source="trace.sh").nccl_env) == {"NCCL_SOCKET_IFNAME": "=ens1f0np0",
                                                                   "NCCL_IB_HCA": "=mlx5_0:1 "}


# A wrapper without continuation lines: prose a paste puts between two lines cannot split a command here.
WRAPPER = """\
#!/bin/bash
GID=3
export NCCL_IB_GID_INDEX=$GID NCCL_IB_TC=106  # RoCE v2, DSCP 26
export NCCL_IB_HCA=$(ls /sys/class/infiniband | paste -sd,)
printf '%s\\n' 'NCCL_SOCKET_IFNAME==ens2f0np0' 'NCCL_IB_TC = 104' > /etc/nccl.conf
"""


def _verdict(text: str) -> tuple[dict[str, str], list[str]]:
    d = parse_text(text, source="host1.sh")
    return dict(d.nccl_env), sorted(re.sub(r"^line \d+: ", "", w) for w in (d.read.warnings if d.read else ()))


@settings(max_examples=25, deadline=None)
@given(mutate=mutations(protect=lambda line: True))
def test_script_variables_survive_envelopes_and_prose(mutate: Callable[[str], str]) -> None:
    assert _verdict(mutate(WRAPPER)) == _verdict(WRAPPER)


def test_a_ten_megabyte_export_is_refused_in_linear_time() -> None:
    line = "export NCCL_ALGO=" + "ab'" * 3_400_000
    env = read_env_file([(1, line), (2, "NCCL_IB_TC=106")], "shell")  # shlex would take a minute
    assert dict(env.values) == {"NCCL_IB_TC": "106"} and "not read" in env.assignments[0].problem
