"""The soak's settings (bench/soak.py): the bench settings, a thread queue and a process queue."""

from bench.settings_ours import *  # noqa: F403

TASKS["default"]["QUEUES"] = ["default", "slow", "soak_t", "soak_p"]  # noqa: F405
SCHEDULER = {
    **SCHEDULER,  # noqa: F405
    "QUEUES": {"soak_p": {"mode": "process"}},
    "RETRY_BACKOFF_BASE": 0.2,
    "RETRY_BACKOFF_MAX": 2.0,
}
