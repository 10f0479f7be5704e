"""Many real workers of the reference runtime on one store (``durable-sim workers``).

The simulator runs every process of a world in one trio loop on a virtual clock; what it cannot
show is the operating system's side of several workers: two processes racing for one lease file,
a worker stopped by the kernel (``SIGSTOP``) past its lease and woken as a zombie, a ``SIGKILL``
in the middle of a store operation while another process writes the same database. This mode
starts N real worker processes on one store (``FileStore`` or ``SQLiteStore``, real files, real
clock), lets them race for the conversations' leases, kills some at their own crash boundaries
(``kill_at``: the k-th store operation or tool effect a process crosses), pauses others past the
lease TTL, restarts the killed ones, and judges the result from the store's contents, the
services' ledger and the workers' trace (``judge``): every input answered (I5), each tool's
effects as its policy promises (I1), every accepted append carried the current lease and no
epoch was held twice (I8), and the fleet finished in time (I7).

- ``agent``: the worker's agent (a scripted model, a payment tool and a receipt tool on the
  ledger) and the store it opens;
- ``child``: one worker process;
- ``fleet``: the parent (spawn, kill plan, pauses, restarts, the deadline);
- ``judge``: the verdict.
"""
