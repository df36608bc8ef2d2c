"""Tests of status reporting."""

# Every (status, stage) of a job that passes through every stage and succeeds, in order.
EVERY_STAGE = [
    ("starting", "starting"),
    ("starting", "head_infrastructure"),
    ("workers", "workers"),
    ("frontend", "frontend"),
    ("benchmark", "benchmark"),
    ("completed", "cleanup"),
]
