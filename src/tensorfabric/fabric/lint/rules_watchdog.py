"""R10: a PFC watchdog on every lossless switch port and storm prevention on NICs."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric import roce
from tensorfabric.fabric.lint import finding, fixes, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

# One advice everywhere (issue 30): the vendor defaults SONiC's `pfcwd start_default` applies (roce.py says why).
ADVICE = (f"{roce.PFCWD_ACTION}, {roce.PFCWD_DETECTION_MS} ms detection / {roce.PFCWD_RESTORATION_MS} ms "
          f"restoration, {roce.PFCWD_POLL_MS} ms poll")

OFF = "pfcwd.off"
SETTINGS = "pfcwd.settings"
NIC = "pfcwd.nic-storm-prevention-off"
NO_TIMERS = "pfcwd.no-timers"
ABSENT = "pfcwd.absent"
NO_DROP = "pfcwd.no-drop-action"
# Actions that detect a storm but leave the stuck queue paused and lossless: the pause keeps spreading upstream.
_PASS_STORM = {"no-drop": "EOS 'action no-drop' keeps the stuck queue lossless",
               "alert": "SONiC 'alert' only logs the storm"}
# What a platform runs when the config enables the watchdog without timers (SONiC: `pfcwd start_default`,
# sonic-utilities pfcwd/main.py); other platforms' defaults are not documented per release, so they stay unnamed.
_PLATFORM_DEFAULTS = {"sonic": "detection 200 ms, restoration 200 ms, poll 200 ms (pfcwd start_default)",
                      "cumulus-datapath": "poll 100 ms, mitigation after 3 polls (pfc_wd.poll_interval and "
                                          "pfc_wd.robustness in /etc/cumulus/switchd.conf)"}


@rule(OFF, "error", "R10", "PFC watchdog disabled on a lossless switch port")
def off(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        wd = ref.port.watchdog
        if wd is not None and not wd.enabled and ref.port.pfc_priorities:
            yield finding(OFF, ref.subject, "PFC watchdog is off; a stuck NIC can pause the fabric indefinitely",
                          {"watchdog": False, "source": ref.device.source},
                          f"enable the PFC watchdog ({ADVICE})")


@rule(SETTINGS, "warning", "R10", "PFC watchdog forwards/alerts only or detects faster than it polls")
def settings(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        wd = ref.port.watchdog
        if wd is None or not wd.enabled:
            continue
        if wd.detection_ms is not None and wd.polling_ms is not None and wd.detection_ms < wd.polling_ms:
            yield finding(SETTINGS, ref.subject, f"watchdog detection {wd.detection_ms:g} ms < poll interval "
                          f"{wd.polling_ms:g} ms", {"detection_ms": wd.detection_ms, "polling_ms": wd.polling_ms},
                          "poll at least as often as the detection time")
        if wd.action is not None and wd.action != "drop" and wd.action not in _PASS_STORM:
            yield finding(SETTINGS, ref.subject, f"watchdog action {wd.action!r} keeps the storm's traffic lossless",
                          {"action": wd.action}, "use action drop")


@rule(NIC, "warning", "R10", "NIC PFC storm prevention not set")
def nic(ctx: LintContext) -> Iterator[Finding]:
    for endpoint, extra in sorted(ctx.extras.items()):
        if not extra.storm_prevention_ms:
            yield finding(NIC, f"host port {endpoint}", "NIC PFC storm prevention is off",
                          {"storm_prevention_ms": extra.storm_prevention_ms},
                          f"ethtool --set-tunable {endpoint.partition(':')[2]} pfc-prevention-tout 100")


@rule(NO_TIMERS, "warning", "R10", "PFC watchdog enabled without detection/restoration timers")
def no_timers(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        wd = ref.port.watchdog
        if wd is not None and wd.enabled and ref.port.pfc_priorities and wd.detection_ms is None:
            known = _PLATFORM_DEFAULTS.get(ref.device.format) if wd.restoration_ms is None else None
            if known is not None:
                # pfcwd_sw_enable without a PFC_WD table: the defaults are documented and sane, so say which apply.
                yield finding(NO_TIMERS, ref.subject, f"the PFC watchdog is on without timers in the config; the "
                              f"platform defaults apply: {known}",
                              {"watchdog": True, "detection_ms": None, "restoration_ms": None, "defaults": known,
                               "source": ref.device.source},
                              f"nothing to fix; to pin them: {fixes.watchdog(ref.device.format)}", severity="info")
                continue
            yield finding(NO_TIMERS, ref.subject, "the PFC watchdog is on but the config sets no detection or "
                          "restoration time; it runs on platform defaults nobody reviewed",
                          {"watchdog": True, "detection_ms": None, "restoration_ms": wd.restoration_ms,
                           "source": ref.device.source},
                          f"set detection and restoration explicitly ({ADVICE}): {fixes.watchdog(ref.device.format)}")


@rule(ABSENT, "warning", "R10", "no PFC watchdog configured on a lossless port of a whole-device config")
def absent(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        if ref.device.complete and ref.port.pfc_priorities and ref.port.watchdog is None:
            yield finding(ABSENT, ref.subject, "the port is lossless but the configuration has no PFC watchdog; a "
                          "stuck receiver can pause the fabric indefinitely",
                          {"pfc_priorities": sorted(ref.port.pfc_priorities), "source": ref.device.source},
                          fixes.watchdog(ref.device.format))


@rule(NO_DROP, "warning", "R10", "PFC watchdog detects storms but does not drop (no-drop / alert): storms pass")
def no_drop(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        wd = ref.port.watchdog
        if wd is None or not wd.enabled or not ref.port.pfc_priorities or wd.action not in _PASS_STORM:
            continue
        yield finding(NO_DROP, ref.subject, f"PFC watchdog action {wd.action!r}: {_PASS_STORM[wd.action]}, so a "
                      "stuck receiver's pause storm still spreads to every upstream switch",
                      {"action": wd.action, "source": ref.device.source}, fixes.watchdog_drop(ref.device.format))
