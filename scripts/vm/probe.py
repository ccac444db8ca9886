# The test VM's probe (scripts/test-vm, docs/vm.md): a program that does nothing a sandbox could
# object to and returns which interpreter ran it, so a result shows the guarantees the sandbox
# proved for an ordinary program and that the guest's Python 3.13 is what ran.
import sys

print("probe ran")
return {"python": sys.version.split()[0], "executable": sys.executable, "answer": 42}
