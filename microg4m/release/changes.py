"""``CHANGES.md``: what each release changed since the one before, newest first; the
previous release's own history follows the new section unchanged.

The new section names the release's version and date, the previous version, each source
withdrawn (with its date, reason and the clips that left, per split), the clips that left
for other reasons (no longer in the export), the clips added (per split), and per table
the rows added and removed among the clips both releases hold.
"""

from __future__ import annotations

from microg4m.formats.splits import SPLITS


def _per_split(counts: dict[str, int]) -> str:
    return ", ".join(f"{s} {counts[s]}" for s in SPLITS if counts.get(s)) or "none"


def summary(*, version: str, previous_version: str, withdrawn: dict, removed: dict, added: dict) -> str:
    """One line for the card and Croissant (no source named; CHANGES.md names them)."""
    if not previous_version:
        gone = sum(sum(w["clips"].values()) for w in withdrawn.values())
        text = f"First release ({version})."
        if withdrawn:
            text += f" {len(withdrawn)} source(s) withdrawn before it ({gone} clips left out)."
        return text
    gone = sum(sum(w["clips"].values()) for w in withdrawn.values())
    return (f"Changes since {previous_version}: {len(withdrawn)} source(s) withdrawn ({gone} clips), "
            f"{len(removed)} other clip(s) removed, {sum(added.values())} clip(s) added; every other clip kept its "
            "split (CHANGES.md).")


def section(*, version: str, date: str, previous_version: str, withdrawn: dict, removed: dict,
            added: dict[str, int], table_changes: dict[str, tuple[int, int]], notes: list[str]) -> str:
    """The new section of CHANGES.md."""
    lines = [f"## {version} ({date})", ""]
    lines.append(f"Since {previous_version}." if previous_version else "The first release.")
    lines.append("")
    if withdrawn:
        lines.append("Withdrawn sources (annotations/withdrawn.tsv); none of their clips is in any file of this "
                     "release:")
        for sid, w in withdrawn.items():
            lines.append(f"- {sid}: withdrawn {w['date']}, {w['reason']}; clips left out: "
                         f"{_per_split(w['clips'])}")
        lines.append("")
    if previous_version:
        if removed:
            by = {s: sum(1 for v in removed.values() if v == s) for s in SPLITS}
            lines.append(f"Clips no longer in the export (filter, labels or sources changed): {len(removed)} "
                         f"({_per_split(by)}).")
        lines.append(f"Clips added: {sum(added.values())} ({_per_split(added)}), assigned around the clips already "
                     "released, which all kept their split.")
        for table, (plus, minus) in table_changes.items():
            if plus or minus:
                lines.append(f"- {table}: {plus} row(s) added, {minus} removed among the clips of both releases")
        lines.append("")
    for note in notes:
        lines.append(f"- note: {note}")
    if notes:
        lines.append("")
    return "\n".join(lines)


def document(new_section: str, previous_changes: str) -> str:
    old = previous_changes.split("\n", 1)[1].lstrip("\n") if previous_changes.startswith("# ") else previous_changes
    text = "# Changes\n\n" + new_section.rstrip("\n") + "\n"
    if old.strip():
        text += "\n" + old.rstrip("\n") + "\n"
    return text
