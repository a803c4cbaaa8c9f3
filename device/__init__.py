"""memsync's offline core: SQLCipher store, op queue, sync client, agent.

Invariants: device never imports cloud or simulator; it meets the cloud only on the
wire. Importing it sets BLAS to one thread unless the environment says otherwise
(``device.threads``), before numpy is loaded through it.
"""

from device import threads as _threads

_threads.set_environment()
