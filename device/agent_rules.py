"""``DeviceAgent``'s behaviour rules and what the background consolidation wrote
(``device.learned``), as delegations.

Invariants: a rule is accepted, rejected, revised or undone only through the agent's
ordinary writes (``confirm``, ``dont_use``, ``revise_rule``: one local op each), after
``learned.rule`` checked the record is a behaviour rule; undo goes back to the rule's
previous words as a new version, never by rewriting one.
"""

from __future__ import annotations

from device import learned, views
from device.agent_reading import ReadingFacade
from device.agent_writing import WritingFacade


class RulesFacade(WritingFacade, ReadingFacade):
    """The rules of ``DeviceAgent`` (see ``device.agent``)."""

    def rules(self) -> list[views.RecordView]:
        """Behaviour rules: proposed (candidate), accepted (active), undone (not in use)."""
        return learned.rules(self.what_do_you_know())

    def accept_rule(self, record_id: str) -> views.LocalResult:
        """Accept a proposed behaviour rule: it takes effect from now on."""
        learned.rule(self.what_do_you_know(), record_id)
        return self.confirm(record_id)

    def reject_rule(self, record_id: str) -> views.LocalResult:
        """Reject a proposed rule, or undo an accepted one (kept, not in use)."""
        learned.rule(self.what_do_you_know(), record_id)
        return self.dont_use(record_id)

    def revise_rule(self, record_id: str, text: str) -> views.LocalResult:
        """Rewrite an accepted or proposed rule: a new version (the old stays in history)."""
        learned.rule(self.what_do_you_know(), record_id)
        return self._ops.revise_rule(record_id, text)

    def undo_rule(self, record_id: str) -> views.LocalResult:
        """Back to the rule's previous words (a new version), else stop using it."""
        view = learned.rule(self.what_do_you_know(), record_id)
        words = learned.undo_words(view, self.record_history(record_id))
        return self.dont_use(record_id) if words is None else self.revise_rule(record_id, words)

    def recently_learned(self, days: int = 7) -> list[views.RecordView]:
        """Active records the background consolidation wrote in the last ``days`` days."""
        return learned.recently_learned(self.what_do_you_know(), self._now_dt(), days)

    def waiting_for_confirmation(self) -> list[views.RecordView]:
        """Candidates the user is asked to confirm."""
        return learned.waiting(self.what_do_you_know())
