"""Finding: the record every check returns (host doctor, fabric lint, monitor).

A Finding is a fact with a verdict: which rule fired, how bad it is, what it is about, the evidence
that triggered it and what to do. Checks return every finding rather than stopping at the first; only
malformed input raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["SEVERITIES", "Finding", "Severity", "exit_code_for", "sort_key", "worst_severity"]

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
_RANK = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One result of a check.

    ``rule`` is a stable id such as ``roce.tc-not-lossless``; ``subject`` names what it is about
    (``host h1 mlx5_0 port 1``, ``link leaf1:Ethernet0—h1:eth2``); ``evidence`` holds the facts that
    triggered it (JSON-serialisable values); ``fix`` says what to do.
    """

    rule: str
    severity: Severity
    subject: str
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fix: str = ""

    def __post_init__(self) -> None:
        if self.severity not in _RANK:
            raise ValueError(f"severity {self.severity!r} must be one of {', '.join(SEVERITIES)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "subject": self.subject,
            "message": self.message,
            "evidence": dict(self.evidence),
            "fix": self.fix,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            rule=str(data["rule"]),
            severity=data["severity"],
            subject=str(data["subject"]),
            message=str(data["message"]),
            evidence=dict(data.get("evidence", {})),
            fix=str(data.get("fix", "")),
        )


def sort_key(finding: Finding) -> tuple[int, str, str]:
    return (_RANK[finding.severity], finding.rule, finding.subject)


def worst_severity(findings: Iterable[Finding]) -> Severity | None:
    """The most severe level present, or ``None`` for no findings."""
    ranked = sorted(findings, key=sort_key)
    return ranked[0].severity if ranked else None


def exit_code_for(findings: Iterable[Finding]) -> int:
    """CLI convention: 1 when any finding is an error, else 0."""
    return 1 if worst_severity(findings) == "error" else 0
