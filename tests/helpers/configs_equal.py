# SPDX-License-Identifier: BSD-3-Clause
"""configs_equal.py A B: the two config.json files of ddptrain runs agree on every key but
job_dir and config (where the run was written, and the --config file it read). Prints
"N keys equal" and exits 0, or "differ in KEY, ..." and exits 1."""
import json
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    d.pop("job_dir", None)
    d.pop("config", None)
diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
print("differ in " + ", ".join(diff) if diff else f"{len(a)} keys equal")
sys.exit(1 if diff else 0)
