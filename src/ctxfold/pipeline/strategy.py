"""The strategy protocol: one rung of the ladder, a small object with a name and one method.

`run(view)` is a generator. It reads the view and yields proposals: a `SummaryCall` when it needs
a summary (the driver answers with a `SummaryResult`, or throws the summarizer's exception in at
the yield), or an edit (`Replace`, `MaskResults`) that the pipeline applies to the view, answering
True, or False when it refused it. It returns why it stopped early (a short phrase such as "the
summarizer declined"), or None when it did what it could.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol, runtime_checkable

from ctxfold.pipeline.proposals import Proposal
from ctxfold.pipeline.view import WorkingView

Flow = Generator[Proposal, Any, "str | None"]


@runtime_checkable
class Strategy(Protocol):
    """One rung of the ladder.

    `run(view)` must:
    - propose cuts only at safe cut points, and never over what `view.protected()` names;
    - stop as soon as `view.fits`;
    - be a generator of proposals (see the module docstring) that returns its stop reason.
    """

    name: str

    def run(self, view: WorkingView) -> Flow: ...
