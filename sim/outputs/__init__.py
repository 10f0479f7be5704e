"""Layer 5, outputs: what a user sees or drives -- reports, the bench, the real-process host, the
command line and the pytest plugin. Nothing in ``sim`` imports it."""
