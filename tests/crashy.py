"""A task function for executor tests: runs like the real one except for
chosen seeds, where it raises (a failed run) or kills its own process (a
crashed worker)."""

import json
import os
import signal

from ccarena.experiments.executors import RunFailed, execute_task

RAISE_SEED = 11
KILL_SEED = 12


def task(t, report=None):
    seed = json.loads(t.engine_json)["run"]["seed"]
    if seed == RAISE_SEED:
        raise_in_engine = RunFailed(t.run_id, "RuntimeError: injected failure", 0.0)
        return raise_in_engine
    if seed == KILL_SEED:
        os.kill(os.getpid(), signal.SIGKILL)
    return execute_task(t, report)
