"""The Stable sections: the system policy and the tool definitions, verbatim."""

from __future__ import annotations

import msgspec

import holon.records as r
from holon.context.budget import Candidate
from holon.context.sections.layout import Counter, section_candidate, section_form

__all__ = ["system_candidate", "tools_candidate"]


def system_candidate(policy: r.SystemPolicy | None, count: Counter) -> Candidate | None:
    """The system/policy prompt, verbatim (pinned: a model call without it is a different agent)."""
    if policy is None or not policy.text:
        return None
    return section_candidate("system", [section_form("full", [policy.text], count)])


def tools_candidate(policy: r.SystemPolicy | None, count: Counter) -> Candidate | None:
    """Tool definitions as JSON lines (adapters also pass them structured).

    The parameters keep the order the policy declares them in, which is the order the
    adapters send them in: the section's text is what the cache identity hashes, and
    Anthropic caches the tool definitions as sent, so a policy whose schemas differ only
    in key order is a different cacheable prefix. Sorted, both rendered one cache key
    while the second request missed the first's cache.
    """
    if policy is None or not policy.tools:
        return None
    lines = ["## Tools"]
    for tool in policy.tools:
        # The line's own keys in sorted order, as they always were.
        spec = msgspec.json.encode(
            {"description": tool.description, "name": tool.name, "parameters": tool.parameters}
        ).decode()
        lines.append(spec)
    return section_candidate("tools", [section_form("full", lines, count)])
