# Loaded by every Python the clock stages of scripts/test.sh start
# (PYTHONPATH). Under libfaketime with FAKETIME_DONT_FAKE_MONOTONIC=1,
# time.sleep fails with EINVAL: Python sleeps with an absolute
# clock_nanosleep on CLOCK_MONOTONIC, and libfaketime moves that deadline
# by the fake offset (+-400 days) out of range. select's relative timeout
# is left alone, so sleep waits on it here; the wall clock Python reads
# stays libfaketime's, as the stage intends.
import os
import select
import time

if "faketime" in os.environ.get("LD_PRELOAD", ""):

    def _sleep(seconds, _mono=time.monotonic, _select=select.select):
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        end = _mono() + seconds
        while True:
            left = end - _mono()
            if left <= 0:
                return
            _select([], [], [], left)

    time.sleep = _sleep
