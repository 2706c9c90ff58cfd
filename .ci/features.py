"""The crate's features to check alone, `light` or `heavy` ones, read from `cargo metadata
--all-features` on stdin: a feature is light when the optional dependencies it enables (itself
and through the features it enables) bring at most LIGHT crates, so that checking it in a target
directory of its own costs little beyond the crate itself. `none` (no feature) is light;
`default`, `full` and `jemalloc` are not listed."""

import json
import sys

LIGHT = 100

metadata = json.load(sys.stdin)
root = metadata["resolve"]["root"]
packages = {package["id"]: package for package in metadata["packages"]}
features = packages[root]["features"]
nodes = {node["id"]: node for node in metadata["resolve"]["nodes"]}
# The crate's dependencies, by their names as the resolve writes them (`-` as `_`).
direct = {dep["name"]: dep["pkg"] for dep in nodes[root]["deps"]}


def dependency(name):
    """The crate's dependency `name` (as its features write it), if it is one."""
    return direct.get(name.replace("-", "_"))


def closure(package, seen):
    """`package` and every crate it depends on (for any target, as the resolve has it)."""
    if package not in seen:
        seen.add(package)
        for dep in nodes[package]["deps"]:
            closure(dep["pkg"], seen)
    return seen


def enabled(feature, seen):
    """The dependencies `feature` enables, itself and through the features it enables."""
    if feature in seen:
        return set()
    seen.add(feature)
    deps = set()
    for entry in features.get(feature, []):
        name = entry.removeprefix("dep:").split("/")[0].rstrip("?")
        if entry.startswith("dep:") or (dependency(name) and name not in features):
            deps.add(name)
        else:
            deps |= enabled(name, seen)
    return deps


def weight(feature):
    crates = set()
    for dep in enabled(feature, set()):
        if dependency(dep):
            closure(dependency(dep), crates)
    return len(crates)


listed = [f for f in features if f not in ("default", "full", "jemalloc")]
light = ["none"] + [f for f in listed if weight(f) <= LIGHT]
heavy = [f for f in listed if weight(f) > LIGHT]
print(" ".join(light if sys.argv[1] == "light" else heavy))
