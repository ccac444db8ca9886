# The test VM's fork bomb (scripts/vm/guest-run, docs/vm.md): forks until the sandbox refuses, each
# child sleeping, so that only process_count ends it, with limit_hit saying so.
import os
import time

while True:
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
