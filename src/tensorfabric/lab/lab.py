"""Build, drive and tear down a lab.

Usage::

    with Lab(hosts=2, rate="1gbit") as lab:
        procs = lab.spawn([sys.executable, "-m", "tensorfabric", "bench", "--op", "all_reduce"])
        ...

Building goes spec → plan → kernel, recording every namespace in the state file before the next step, and
any failure (or an interrupt) part-way through removes everything made so far before the error propagates.
Teardown kills every process still inside the lab's namespaces (those it started and any other), then
deletes the namespaces, which takes every veth, bridge and qdisc with them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError, LabError
from tensorfabric.fsutil import SCRATCH_ENV, scratch_dir
from tensorfabric.lab.netlink import Netlink, check_privileges, ip_command
from tensorfabric.lab.plan import BRIDGE, HOST_IFACE, LabPlan, ns_prefix, plan_lab
from tensorfabric.lab.spec import DEFAULT_MTU, DEFAULT_SUBNET, LabSpec
from tensorfabric.lab.state import LabState, Owner, StateStore
from tensorfabric.signals import Pending, deferred_signals, terminate_as_interrupt

if TYPE_CHECKING:
    from tensorfabric.lab.status import LabStatus

__all__ = ["DEFAULT_MASTER_PORT", "Lab", "down_all", "lab_down", "rank_env"]

DEFAULT_MASTER_PORT = 29500
_ORPHAN_AGE_S = 60.0
_AUTO_NAME_TRIES = 100
_names = itertools.count()
StepHook = Callable[[str], None]


def _auto_name() -> str:
    # pid + counter: unique among concurrent processes on this machine, and short enough for the name rule.
    return f"p{os.getpid()}n{next(_names)}"


def rank_env(plan: LabPlan, rank: int, master_port: int = DEFAULT_MASTER_PORT) -> dict[str, str]:
    """The torchrun-style variables rank ``rank`` (host ``h<rank>``) gets."""
    return {
        "MASTER_ADDR": plan.host_address(plan.hosts[0]),
        "MASTER_PORT": str(master_port),
        "RANK": str(rank),
        "WORLD_SIZE": str(len(plan.hosts)),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GLOO_SOCKET_IFNAME": HOST_IFACE,
        "NCCL_SOCKET_IFNAME": HOST_IFACE,
        # UCX (the NIXL engine) sees every namespace as one node and would move bytes by shared memory/CMA
        # around the shaped link: TCP on the lab interface only keeps the lab honest.
        "UCX_TLS": "tcp,self",
        "UCX_NET_DEVICES": HOST_IFACE,
        "TENSORFABRIC_LAB_HOST": plan.hosts[rank],
    }


class Lab:
    """A lab of network namespaces. ``Lab(...)`` only validates; :meth:`up` (or ``with``) builds it."""

    def __init__(self, hosts: int = 2, rate: str | float = "1gbit", *, name: str | None = None,
                 topology: str = "star", leaves: int | None = None, spines: int | None = None,
                 uplink_rate: str | float | None = None, mtu: int = DEFAULT_MTU, subnet: str = DEFAULT_SUBNET,
                 state_dir: str | os.PathLike[str] | None = None,
                 netlink: Netlink | None = None, on_step: StepHook | None = None) -> None:
        spec = LabSpec.create(name=name or _auto_name(), hosts=hosts, rate=rate, topology=topology, leaves=leaves,
                              spines=spines, uplink_rate=uplink_rate, mtu=mtu, subnet=subnet)
        self._init(spec, StateStore(state_dir), netlink or Netlink(), on_step)
        self._auto_named = name is None

    @classmethod
    def from_spec(cls, spec: LabSpec, *, state_dir: str | os.PathLike[str] | None = None,
                  netlink: Netlink | None = None, on_step: StepHook | None = None) -> Lab:
        lab = cls.__new__(cls)
        lab._init(spec, StateStore(state_dir), netlink or Netlink(), on_step)
        return lab

    @classmethod
    def attach(cls, name: str, *, state_dir: str | os.PathLike[str] | None = None,
               netlink: Netlink | None = None) -> Lab:
        """The existing lab ``name`` (made by ``lab up`` or another process), for exec and status."""
        store = StateStore(state_dir)
        state = store.load(name)
        lab = cls.__new__(cls)
        lab._init(state.spec, store, netlink or Netlink(), None)
        lab._state = state
        return lab

    def _init(self, spec: LabSpec, store: StateStore, netlink: Netlink, on_step: StepHook | None) -> None:
        self.spec = spec
        self.plan = plan_lab(spec)
        self._store = store
        self._nl = netlink
        self._on_step = on_step
        self._state: LabState | None = None
        self._procs: list[subprocess.Popen[Any]] = []
        self._auto_named = False
        self._signals: list[AbstractContextManager[None]] = []
        self._scratch: str | None = None
        """The owner's ``tf-lab-<pid>-*`` directory, given to every process it starts as ``SCRATCH_ENV``: their
        scratch (UCX logs) goes with it on teardown, even for a process that was SIGKILLed (None: persistent lab)."""

    # lifecycle ------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def hosts(self) -> tuple[str, ...]:
        return self.plan.hosts

    def address(self, host: str) -> str:
        self._check_host(host)
        return self.plan.host_address(host)

    def up(self, *, persistent: bool = False) -> Lab:
        """Build the lab. ``persistent`` labs have no owner process (the CLI's ``lab up``).

        Ctrl-C, SIGTERM and SIGHUP during the build are acted on between steps, never inside one: raised at an
        arbitrary instruction (a logging lock, a pyroute2 finaliser) the interrupt could be swallowed and the lab
        built anyway. A signal that came during the build removes everything made so far and propagates.
        """
        check_privileges()
        with deferred_signals() as pending:
            self._up(persistent, pending)
        return self

    def _up(self, persistent: bool, pending: Pending) -> None:
        state = LabState(self.spec, owner=None if persistent else Owner.current())
        for _ in range(_AUTO_NAME_TRIES):
            pending.check()
            try:
                self._claim(state)
                break
            except InputError:
                # A chosen name is the user's to fix; a generated one may collide with the leftovers of a
                # killed process that had the same pid, so pick the next one.
                if not self._auto_named:
                    raise
                self.spec = replace(self.spec, name=_auto_name())
                self.plan = plan_lab(self.spec)
                state = replace(state, spec=self.spec)
        else:
            raise LabError(f"no free lab name after {_AUTO_NAME_TRIES} tries; run 'tensorfabric lab down --all'")
        self._state = state
        try:
            if not persistent:
                self._scratch = scratch_dir("lab")
            with self._nl.session():
                self._build(pending.check)
            self._save(phase="up")
            pending.check()
        except BaseException as exc:
            try:
                self.down()  # still inside deferred_signals: a second Ctrl-C cannot cut the rollback short
            except LabError as cleanup:
                # Keep the original failure as the error; say what the rollback could not remove.
                exc.add_note(f"rollback incomplete: {cleanup}")
            raise

    def _claim(self, state: LabState) -> None:
        taken = [ns for ns in self._nl.list_netns() if ns.startswith(ns_prefix(self.name))]
        if taken:
            raise InputError(f"lab name: {self.name!r} is already in use (namespaces {', '.join(taken)} exist); "
                             f"pick another --name or run 'tensorfabric lab down {self.name}'")
        self._store.claim(state)

    def __enter__(self) -> Lab:
        # SIGTERM/SIGHUP inside the block raise like Ctrl-C, so __exit__ tears the lab down for them too.
        signals = terminate_as_interrupt()
        signals.__enter__()
        self._signals.append(signals)
        try:
            return self.up()
        except BaseException:
            self._signals.pop().__exit__(None, None, None)
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.down()
        finally:
            if self._signals:
                self._signals.pop().__exit__(None, None, None)

    def down(self) -> None:
        """Stop the lab's processes and remove every namespace it recorded; safe to call twice."""
        self.kill_processes()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        state = self._state
        if state is None:
            return
        self._save(phase="down")
        # Anything else still running in a lab host (a `lab exec` in the background) would keep its namespace
        # and veths alive after the name is gone; the lab owns its hosts, so it stops them.
        for pids in self._nl.netns_pids(state.namespaces).values():
            for pid in pids:
                if pid != os.getpid():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        errors: list[str] = []
        for ns in reversed(state.namespaces):
            try:
                self._nl.remove_netns(ns)
            except LabError as exc:
                errors.append(str(exc))
        if errors:
            raise LabError(f"lab {self.name!r} was not fully removed: {'; '.join(errors)}")
        self._store.remove(self.name)
        self._state = None

    def _save(self, *, phase: str | None = None, namespace: str | None = None) -> None:
        assert self._state is not None, "lab state used before up()"
        state = self._state if namespace is None else self._state.with_namespace(namespace)
        if phase is not None:
            state = LabState(state.spec, state.namespaces, phase, state.owner, state.created_at)
        self._state = state
        self._store.save(state)

    def _build(self, checkpoint: Callable[[], None]) -> None:
        plan, nl, mtu = self.plan, self._nl, self.spec.mtu

        def step(what: str) -> None:
            checkpoint()  # the one place a signal that came during the build stops it
            if self._on_step is not None:
                self._on_step(what)

        for node in plan.nodes:
            ns = plan.netns(node.name)
            step(f"netns {ns}")
            if nl.netns_exists(ns):  # someone else's (another state directory): never record, never remove it
                raise LabError(f"network namespace {ns!r} already exists; pick another lab name")
            # Record before creating: a crash between the two leaves a name that down() ignores if absent.
            self._save(namespace=ns)
            nl.create_netns(ns)
            settings = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
            settings.append(f"net.ipv4.ip_forward={int(node.forwarding)}")
            if node.forwarding:
                # ECMP on the 5-tuple, as fabric switches hash: different flows between two hosts can take
                # different spines (the default hashes addresses only, pinning each host pair to one spine).
                settings.append("net.ipv4.fib_multipath_hash_policy=1")
            nl.sysctl(ns, settings)
            nl.set_up(ns, ["lo"])
        for link in plan.links:
            step(f"link {link.a}--{link.b}")
            nl.add_veth(plan.netns(link.a.device), link.a.port, plan.netns(link.b.device), link.b.port, mtu)
            for end in (link.a, link.b):
                nl.shape(plan.netns(end.device), end.port, link.rate_bps)
                nl.set_up(plan.netns(end.device), [end.port])
        for node in plan.nodes:
            if node.bridge_ports:
                step(f"bridge {node.name}")
                nl.add_bridge(plan.netns(node.name), BRIDGE, node.bridge_ports, mtu)
                nl.set_up(plan.netns(node.name), [BRIDGE])
        for addr in plan.addresses:
            step(f"address {addr.node} {addr.cidr}")
            nl.add_address(plan.netns(addr.node), addr.ifname, addr.cidr)
        for route in plan.routes:
            step(f"route {route.node} {route.dst}")
            nl.add_route(plan.netns(route.node), route.dst, route.via)

    # running things in hosts -----------------------------------------------------------------------------
    def _check_host(self, host: str) -> None:
        if host not in self.plan.hosts:
            raise InputError(f"host: {host!r} is not a host of lab {self.name!r} "
                             f"(hosts: {', '.join(self.plan.hosts)})")

    def _check_node(self, node: str) -> None:
        nodes = [n.name for n in self.plan.nodes]
        if node not in nodes:
            raise InputError(f"host: {node!r} is not a host of lab {self.name!r} (hosts: {', '.join(self.plan.hosts)};"
                             f" switches: {', '.join(n for n in nodes if n not in self.plan.hosts)})")

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """The argv that runs ``argv`` inside the namespace of ``host`` (a host or, for inspection, a switch)."""
        self._check_node(host)
        if self._state is None:
            raise LabError(f"lab {self.name!r} is not up; use 'with Lab(...)' or lab.up() first")
        if not argv:
            raise InputError("command: nothing to run; give a program after '--'")
        return [ip_command(), "netns", "exec", self.plan.netns(host), *argv]

    def popen(self, host: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` in ``host``; the lab kills it (and its process group) on teardown."""
        full = dict(os.environ if env is None else env)
        if self._scratch is not None:
            full.setdefault(SCRATCH_ENV, self._scratch)
        proc: subprocess.Popen[Any] = subprocess.Popen(
            self.command(host, argv), env=full, start_new_session=True, **kwargs)
        self._procs.append(proc)
        return proc

    def exec(self, host: str, argv: Sequence[str], *, timeout_s: float | None = None,
             env: Mapping[str, str] | None = None, capture: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` in ``host`` to completion."""
        try:
            return subprocess.run(self.command(host, argv), env=None if env is None else dict(env),
                                  capture_output=capture, text=True, timeout=timeout_s, check=False)
        except FileNotFoundError as exc:
            raise LabError(f"cannot run {argv[0]!r} in {host}: {exc}") from exc

    def rank_envs(self, env: Mapping[str, str] | None = None,
                  master_port: int = DEFAULT_MASTER_PORT) -> list[dict[str, str]]:
        """Each rank's full environment: ``env`` (default: this process's) with :func:`rank_env` laid over it,
        plus ``OMP_NUM_THREADS=1`` when absent because all hosts share this machine's CPUs."""
        base = dict(os.environ if env is None else env)
        base.setdefault("OMP_NUM_THREADS", "1")
        return [{**base, **rank_env(self.plan, rank, master_port)} for rank in range(len(self.plan.hosts))]

    def spawn(self, rank_cmd: Sequence[str], *, env: Mapping[str, str] | None = None,
              master_port: int = DEFAULT_MASTER_PORT, **kwargs: Any) -> list[subprocess.Popen[Any]]:
        """Start ``rank_cmd`` once per host, rank ``r`` on ``h<r>``, with :meth:`rank_envs`.

        ``kwargs`` go to :class:`subprocess.Popen` (e.g. ``stdout=``). The lab kills the processes on teardown.
        """
        return [self.popen(host, rank_cmd, env=rank_env_, **kwargs)
                for host, rank_env_ in zip(self.plan.hosts, self.rank_envs(env, master_port), strict=True)]

    def kill_processes(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._procs.clear()

    def status(self) -> LabStatus:
        """Hosts, addresses, links, rates and counters; see :func:`tensorfabric.lab.status.lab_status`."""
        from tensorfabric.lab.status import lab_status

        return lab_status(self.plan, self._nl)


def lab_down(name: str, *, state_dir: str | os.PathLike[str] | None = None,
             netlink: Netlink | None = None) -> list[str]:
    """Remove lab ``name`` as recorded in its state file; returns the namespaces removed."""
    check_privileges()
    lab = Lab.attach(name, state_dir=state_dir, netlink=netlink)
    assert lab._state is not None
    removed = list(lab._state.namespaces)
    lab.down()
    return removed


def down_all(*, state_dir: str | os.PathLike[str] | None = None, netlink: Netlink | None = None,
             prefix: str = "", include_owned: bool = False, orphans: bool = True,
             clock: Callable[[], float] = time.time) -> list[str]:
    """Remove stale labs whose name starts with ``prefix``: every CLI-made lab, every lab whose owner
    process is gone, and (``orphans``) every ``tf-<prefix>`` namespace that no readable state file here
    accounts for, has no process in it and is over a minute old. Labs held by a live process are kept unless
    ``include_owned``. Returns the namespaces removed."""
    from tensorfabric.lab.plan import NS_PREFIX

    check_privileges()
    nl = netlink or Netlink()
    store = StateStore(state_dir)
    removed: list[str] = []
    unreadable: list[str] = []
    for name in store.names():
        if not name.startswith(prefix):
            continue
        try:
            state = store.load(name)
        except LabError:
            unreadable.append(name)  # its namespaces, if any, are handled as orphans below
            continue
        if state.owner is not None and state.owner.alive() and not include_owned:
            continue
        removed += lab_down(name, state_dir=state_dir, netlink=nl)
    if not orphans:
        return removed
    known = [ns_prefix(n) for n in store.names() if n not in unreadable]
    for ns in nl.list_netns():
        if not ns.startswith(NS_PREFIX + prefix) or any(ns.startswith(p) for p in known):
            continue
        # A lab being built from another state directory is young or already has processes; leave it.
        if clock() - nl.netns_created(ns) > _ORPHAN_AGE_S and not nl.netns_pids([ns]).get(ns):
            nl.remove_netns(ns)
            removed.append(ns)
    remaining = nl.list_netns()
    for name in unreadable:
        if not any(ns.startswith(ns_prefix(name)) for ns in remaining):
            store.remove(name)
    return removed
