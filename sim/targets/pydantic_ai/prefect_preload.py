"""What a warm zygote imports for the ``prefect`` durability (``sim.targets.zygote``).

Why a module of its own: Prefect reads its settings when it is first imported, and a zygote
imports before any point is known. This module sets the settings every point shares (no UI, no
analytics, no logs to the API, no migration: ``prefect_env``) with paths that belong to no point
-- Prefect's home beside the migrated template, a database nobody opens -- then imports the
flow's module (Prefect, its server app, pydantic-ai). A forked child then sets its point's paths
and API URL and refreshes Prefect's settings (``prefect_env.configure``); Prefect keeps no
setting from import time that a point's differ in (checked for Prefect 3.9: only the server's
``testing.test_mode``, the same for both). Importing it starts no thread and opens no file
(the zygote checks both before it forks).
"""

from __future__ import annotations

import importlib

from sim.targets.pydantic_ai import prefect_env

prefect_env.set_shared_settings()
importlib.import_module("sim.targets.pydantic_ai.prefect_agent")
