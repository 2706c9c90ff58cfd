"""The manifest's `rust-version` against the packages of the lock file (`cargo metadata` on stdin):
fails, naming them, when a dependency asks for a newer Rust."""
import json
import sys


def version(text):
    return tuple(int(part) for part in (text.split(".") + ["0", "0"])[:3])


meta = json.load(sys.stdin)
ours = next(p for p in meta["packages"] if p["id"] in meta["workspace_members"])
msrv = ours["rust_version"]
newer = [
    "%s %s (Rust %s)" % (p["name"], p["version"], p["rust_version"])
    for p in meta["packages"]
    if p.get("rust_version") and version(p["rust_version"]) > version(msrv)
]
if newer:
    sys.exit("rust-version = %s, but these ask for more: %s" % (msrv, ", ".join(newer)))
print("rust-version = %s: no dependency asks for more" % msrv)
