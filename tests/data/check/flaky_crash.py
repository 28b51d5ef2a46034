"""Fails only when the marker file named by its first argument exists, which the first
run creates: so run 1 succeeds and run 2 crashes."""
import pathlib
import sys

marker = pathlib.Path(sys.argv[1])
print("starting")
if marker.exists():
    raise RuntimeError("the second run hit a flaky failure")
marker.write_text("run 1 was here")
print("done")
