"""Starts a child that sleeps, writes its pid to the file named by argv[1], then hangs."""
import pathlib
import subprocess
import sys
import time

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
pathlib.Path(sys.argv[1]).write_text(str(child.pid))
print("hanging", flush=True)
time.sleep(600)
