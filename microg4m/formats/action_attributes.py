"""The label map as the attributes of a labelling tool's person track: what CVAT and Label
Studio show, and how a person's ticked attributes become action ids again.

The pose-type actions (``PERSON_MOVEMENT``: stand, sit, walk, ...) are one choice: a person
has at most one pose at a keyframe (the released MicroG-4M labels never give two). The
object manipulations and person interactions are several: each is its own yes/no box (CVAT
has no multi-select; Label Studio gets a multiple-choice group per type). The groups keep
the label map's order within each type.

:meth:`ActionAttributes.ids` turns a pose and a set of ticked names back into action ids
in the label map's order; an unknown name and a second pose are :class:`ActionAttributeError`
with the reason, for the caller to report with its file, clip and person.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from microg4m.formats.labels import LABEL_TYPES

POSE_TYPE = "PERSON_MOVEMENT"
POSE = "pose"  # the one-choice attribute's name
NO_POSE = "none"  # its value when no pose is labelled (CVAT's select needs a default)
GROUP_TITLES = {"PERSON_MOVEMENT": "pose (one)", "OBJECT_MANIPULATION": "object manipulation (several)",
                "PERSON_INTERACTION": "person interaction (several)"}
RESERVED = {"person_id", "ava_keyframe", POSE, NO_POSE}


class ActionAttributeError(ValueError):
    """An attribute value that names no action, or a second pose; the message says which."""


@dataclass(frozen=True)
class ActionAttributes:
    ids_in_order: tuple[int, ...]  # the label map's order
    name_of: dict[int, str]
    id_of: dict[str, int]
    type_of: dict[int, str]

    @classmethod
    def from_label_map(cls, lmap: pd.DataFrame) -> "ActionAttributes":
        names = [str(n) for n in lmap["name"]]
        clash = sorted({n for n in names if names.count(n) > 1} | (set(names) & RESERVED))
        if clash:
            raise ValueError(f"label map: action name(s) {clash} repeated or reserved "
                             f"({', '.join(sorted(RESERVED))}); a tool's attributes are named by the actions")
        ids = tuple(int(i) for i in lmap["id"])
        return cls(ids, dict(zip(ids, names)), dict(zip(names, ids)), dict(zip(ids, map(str, lmap["label_type"]))))

    def group(self, label_type: str) -> list[int]:
        """The ids of one label type, in the label map's order."""
        return [i for i in self.ids_in_order if self.type_of[i] == label_type]

    @property
    def poses(self) -> list[int]:
        return self.group(POSE_TYPE)

    @property
    def several(self) -> list[int]:
        """The actions that are yes/no boxes: every type but the poses, type by type."""
        return [i for t in LABEL_TYPES if t != POSE_TYPE for i in self.group(t)]

    def split(self, ids) -> tuple[str, set[str], list[int]]:
        """``(pose name or NO_POSE, names of the other actions, poses left out)`` of a person's
        action ids; with two poses the first (in the given order) is kept and the rest returned."""
        pose, others, dropped = NO_POSE, set(), []
        for a in ids:
            if a not in self.name_of:
                raise ActionAttributeError(f"action id {a} is not in the label map")
            if self.type_of[a] == POSE_TYPE:
                if pose == NO_POSE:
                    pose = self.name_of[a]
                elif self.name_of[a] != pose:
                    dropped.append(a)
            else:
                others.add(self.name_of[a])
        return pose, others, dropped

    def ids(self, poses, ticked) -> list[int]:
        """Action ids (label map order) of the pose value(s) and the ticked names of one person
        at one keyframe; ActionAttributeError for an unknown name or two poses."""
        chosen = [p for p in poses if p not in ("", NO_POSE)]
        unknown = [n for n in [*chosen, *ticked] if n not in self.id_of]
        if unknown:
            raise ActionAttributeError(f"unknown action(s) {', '.join(map(repr, unknown))} (not in the label map)")
        wrong = [n for n in chosen if self.type_of[self.id_of[n]] != POSE_TYPE]
        wrong += [n for n in ticked if self.type_of[self.id_of[n]] == POSE_TYPE]
        if wrong:
            raise ActionAttributeError(f"action(s) {', '.join(map(repr, wrong))} given as the wrong kind "
                                       f"(poses are the one choice {POSE!r}, the others yes/no boxes)")
        if len(set(chosen)) > 1:
            raise ActionAttributeError(f"two poses at one keyframe ({', '.join(map(repr, sorted(set(chosen))))}); "
                                       "a person has one")
        got = {self.id_of[n] for n in [*chosen, *ticked]}
        return [i for i in self.ids_in_order if i in got]
