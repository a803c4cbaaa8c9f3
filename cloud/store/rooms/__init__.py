"""The record store's interface, split by room: one small ``Protocol`` per concern, each
implemented by one mixin of ``cloud.store.sql.SqlSession`` in a module of its own.

Invariants:
- A room module holds a protocol only: no SQL, no runtime import of the store.
- ``IMPLEMENTED_BY`` is the whole map, one room to one mixin; every public method of
  ``SqlSession`` belongs to exactly one room (``tests/cloud/test_store_rooms.py``).
- ``cloud.store.base.StoreSession`` is every room at once, so code typed against it
  keeps type-checking; code that needs one room can say so (``RecordsRoom``).
"""

from __future__ import annotations

# room module -> (its protocol, the mixin implementing it, "module:Class")
IMPLEMENTED_BY: dict[str, tuple[str, str]] = {
    "accounts": ("AccountsRoom", "cloud.store.sql:AccountQueries"),
    "records": ("RecordsRoom", "cloud.store.sql_records:RecordQueries"),
    "lineage": ("LineageRoom", "cloud.store.sql_lineage:LineageQueries"),
    "feed": ("FeedRoom", "cloud.store.sql_feed:FeedQueries"),
    "receipts": ("ReceiptsRoom", "cloud.store.sql_receipts:ReceiptQueries"),
    "keys": ("KeysRoom", "cloud.store.sql_keys:KeyQueries"),
    "search": ("SearchRoom", "cloud.store.search:SearchQueries"),
    "end": ("EndRoom", "cloud.store.sql_end:EndQueries"),
    "work": ("WorkRoom", "cloud.store.sql_work:WorkQueries"),
    "subset": ("SubsetRoom", "cloud.store.sql_subset:SubsetQueries"),
    "export": ("ExportRoom", "cloud.store.sql_export:ExportQueries"),
    "operator": ("OperatorRoom", "cloud.store.sql_ops:OperatorQueries"),
}
# what SqlSession has besides its rooms: the transaction's own plumbing
SESSION_PLUMBING = frozenset({"conn", "lock_space", "count"})
