"""What every invariant check shares (``simulator.check_basics``): a detail names at
most ``MAX_LISTED`` problems and counts the rest, a check passes exactly when it found
none, and a duplicate's receipt reads as what the first try got."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from protocol.operations import EffectKind, Receipt, ReceiptStatus
from simulator.check_basics import MAX_LISTED, applied, check, effective, summary

PROBLEM = st.text(alphabet="abcdefgh ", min_size=1, max_size=8).map(lambda t: f"<{t}>")


@given(st.lists(PROBLEM, max_size=3 * MAX_LISTED))
def test_a_detail_names_the_first_problems_and_counts_the_rest(problems: list[str]) -> None:
    detail = summary(problems, "all good")
    if not problems:
        assert detail == "all good"
        return
    named = problems[:MAX_LISTED]
    assert detail.startswith("; ".join(named))
    more = len(problems) - len(named)
    assert detail.endswith(f"; and {more} more") == (more > 0)
    assert detail.count("<") == len(named)  # no problem past the bound is spelt out


@given(st.lists(PROBLEM, max_size=8))
def test_a_check_passes_exactly_when_it_found_no_problem(problems: list[str]) -> None:
    result = check("name", problems, "ok")
    assert result.passed is (not problems)
    assert result.name == "name"


@given(
    st.sampled_from([s for s in ReceiptStatus if s is not ReceiptStatus.DUPLICATE]), st.booleans()
)
def test_a_duplicate_reads_as_what_the_first_try_got(first: ReceiptStatus, effect: bool) -> None:
    kind = EffectKind.CREATED if effect else None
    original = Receipt(index=0, op_id="op_1", status=first, effect=kind)
    duplicate = Receipt(
        index=0, op_id="op_1", status=ReceiptStatus.DUPLICATE, original_status=first, effect=kind
    )
    assert effective(duplicate) is effective(original)
    assert applied(duplicate) is applied(original)
    assert applied(original) is (
        first is ReceiptStatus.APPLIED or (first is ReceiptStatus.CONFLICT and effect)
    )
