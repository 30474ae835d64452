"""Prefect flows over the DVC stages (``python -m flows.pipeline``; docs/operations.md).

Importing the package sets the offline defaults Prefect needs here before Prefect is imported:
no analytics (it would try DNS and log errors) and a patient ephemeral-server start-up.
"""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
