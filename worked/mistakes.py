"""The known mistakes, in one registry: the checker diagnoses them, quizzes offer their values as wrong answers.

Each mistake is declared with its stage (:mod:`worked.slips`, listed in ``Stage.mistakes`` of
:mod:`worked.stages`); this registry collects them from the architectures' stages.

::

    from worked.mistakes import MISTAKES
    m = MISTAKES["no-scaling"]
    m.id, m.title, m.stage          # "no-scaling", "no scaling", "scaled" (the worked step to re-read)
    m.message(problem)              # what `worked check` (and the web page) says about it
    m.answer_feedback               # the feedback of its value as a 0 % answer in Moodle/GIFT (ends with the id)
    m.transforms(problem)           # the worked.attention.Transform(s) that make the mistake on this problem:
                                    # empty where it changes nothing (no-scaling when the factor is 1) and for
                                    # early-rounding, which is not a different pass (the checker tests it apart)
    of(arch)                        # the mistakes of an architecture's stages

The ids are the same in ``worked check`` reports, the quiz manifest (``entries[].mistakes[].id``), the LMS
exports' feedback, the grader's class report and the web page.
"""
from __future__ import annotations

from . import slips, stages
from .slips import Mistake, Transform

__all__ = ["MISTAKES", "Mistake", "Transform", "of", "stage_in"]


def _owners() -> dict[str, tuple]:
    """Each mistake's id → (the stage that declares it, the update stages of its architecture)."""
    out: dict[str, tuple] = {}
    for arch in stages.ARCHS.values():
        updates = tuple((s.inputs[0], s.id) for s in arch.update if s.scope == "head")
        seen: dict[str, str] = {}       # within an architecture, one stage declares a mistake (across them, the
        for s in stages.every(arch):    # first keeps it: a block's first layer norm is H1 in post-LN, N1 in pre-LN)
            for m in s.mistakes:
                if seen.setdefault(m.id, s.id) != s.id:
                    raise ValueError(f"mistake {m.id!r} is declared by two stages: {seen[m.id]}, {s.id}")
                out.setdefault(m.id, (s, updates))
    return out


_OWNERS = _owners()
MISTAKES: dict[str, Mistake] = {m.id: m.replace(stage=_OWNERS[m.id][0].id, updates=_OWNERS[m.id][1])
                                for m in slips.ALL if m.id in _OWNERS}


def of(arch: "stages.Arch") -> list[Mistake]:
    """The mistakes *arch*'s stages declare, in the order of :data:`MISTAKES`."""
    ids = {m.id for s in stages.every(arch) for m in s.mistakes}
    return [m for m in MISTAKES.values() if m.id in ids]


def stage_in(arch: "stages.Arch", m: Mistake, t: Transform) -> str:
    """Where mistake *m*, made by *t*, first shows in *arch*: the stage of *arch* that declares it (a block's first
    layer norm is H1 in post-LN, N1 in pre-LN), or for a wrong sign in one matrix's update that update."""
    if t.update_of is not None:
        return m.stage_of(t)
    return next((s.id for s in stages.every(arch) if any(x.id == m.id for x in s.mistakes)), m.stage)
