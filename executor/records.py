"""What a resumable batch keeps of each item: its result, the report's view of them, and its completion record.

The aligner's batch (:mod:`aligner.batch`), ``punctuate`` over a folder (:mod:`inference.batch`) and the audio
stages (:mod:`audio.stage_common`) each run many items through :func:`executor.run_tasks`, write a JSON record
beside each output once it is finished, and on the next run skip an item whose record still matches.

    record = read_record(out / f"{name}.json")      # None: missing, unreadable or not a JSON object
    if record is not None and record.get("fingerprint") == fingerprint: ...   # finished already

* :class:`ItemResult`: one item -- ``name``, ``status`` (``failed`` or what the batch calls done and skipped),
  ``error`` (why it failed, naming it) and ``output`` (the file written), with the batch's own counts between.
* :class:`StatusReport`: what a batch report over such results has in common (:meth:`StatusReport.with_status`,
  :attr:`StatusReport.failed`, :meth:`StatusReport.counts`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ItemResult", "StatusReport", "read_record"]


def read_record(path: str | Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing, unreadable, not JSON or not an object (an item whose
    record is damaged is done again, not an error)."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


@dataclass
class ItemResult:
    """One item of a batch. A batch subclasses it with its own counts (defaults needed), which come between
    ``status`` and ``error`` in :meth:`to_dict`: ``error`` and ``output`` are keyword-only and always last."""

    name: str
    status: str
    error: str | None = field(default=None, kw_only=True)
    output: str | None = field(default=None, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """The fields: ``name``, ``status``, the subclass's own, then ``error`` and ``output`` (a report's order)."""
        values = dataclasses.asdict(self)
        for key in ("error", "output"):
            values[key] = values.pop(key)
        return values


class StatusReport:
    """The report of a batch over :class:`ItemResult` s: a subclass says which list they are in (:attr:`results`)."""

    @property
    def results(self) -> Sequence[ItemResult]:
        raise NotImplementedError

    def with_status(self, status: str) -> list[Any]:
        return [result for result in self.results if result.status == status]

    @property
    def failed(self) -> list[Any]:
        return self.with_status("failed")

    def counts(self, statuses: Sequence[str]) -> dict[str, int]:
        """How many results have each status, in the order given."""
        return {status: len(self.with_status(status)) for status in statuses}
