"""memsync's offline core: SQLCipher store, op queue, sync client, agent.

Invariant: device never imports cloud or simulator; it meets the cloud only on the wire.
"""
