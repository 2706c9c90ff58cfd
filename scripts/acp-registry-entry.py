"""The ACP Registry's entry for the command (an `agent.json`), from dist's manifest of a release.

    dist manifest --tag vX.Y.Z --artifacts=all --no-local-paths --output-format=json > manifest.json
    python3 scripts/acp-registry-entry.py manifest.json [ARG ...] > agent.json

Each archive of the release is a platform of the entry (the registry's names: `linux-x86_64`,
`darwin-aarch64`, `windows-x86_64`…), its URL where dist uploads it, its command the binary in it
(dist's tarballs hold it under a directory named as the archive, its zips at their root). The
command's arguments are `acp` unless given (`acp --model openai:gpt-4.1`, say); the registry
wants every platform of three systems, and an agent declaring an `authMethods` entry of the
`agent` or `terminal` type, which `agent-tower acp` does.
"""

import json
import pathlib
import sys
import tomllib

# Rust's target triples, by the registry's platform names.
PLATFORMS = {
    "aarch64-apple-darwin": "darwin-aarch64",
    "x86_64-apple-darwin": "darwin-x86_64",
    "aarch64-unknown-linux-gnu": "linux-aarch64",
    "x86_64-unknown-linux-gnu": "linux-x86_64",
    "aarch64-pc-windows-msvc": "windows-aarch64",
    "x86_64-pc-windows-msvc": "windows-x86_64",
}
ARCHIVES = (".tar.gz", ".tar.xz", ".tar.zst", ".zip")


def entry(manifest, package, args):
    (release,) = manifest["releases"]
    github = release["hosting"]["github"]
    base = github["artifact_base_url"] + github["artifact_download_path"]
    binary = {}
    for name in release["artifacts"]:
        artifact = manifest["artifacts"][name]
        if artifact["kind"] != "executable-zip":
            continue
        (target,) = artifact["target_triples"]
        (executable,) = [a["path"] for a in artifact["assets"] if a["kind"] == "executable"]
        suffix = next(s for s in ARCHIVES if name.endswith(s))
        root = "" if suffix == ".zip" else name[: -len(suffix)] + "/"
        binary[PLATFORMS[target]] = {
            "archive": f"{base}/{name}",
            "cmd": f"./{root}{executable}",
            "args": args,
        }
    systems = {platform.split("-")[0] for platform in binary}
    missing = {"darwin", "linux", "windows"} - systems
    if missing:
        sys.exit(f"acp-registry-entry: the registry wants every system; none for {sorted(missing)}")
    return {
        "id": release["app_name"],
        "name": release["app_name"],
        "version": release["app_version"],
        "description": package["description"],
        "repository": f"https://github.com/{github['owner']}/{github['repo']}",
        "license": package["license"],
        "distribution": {"binary": dict(sorted(binary.items()))},
    }


if __name__ == "__main__":
    with open(sys.argv[1]) as file:
        manifest = json.load(file)
    cargo = pathlib.Path(__file__).resolve().parent.parent / "Cargo.toml"
    with open(cargo, "rb") as file:
        package = tomllib.load(file)["package"]
    json.dump(entry(manifest, package, sys.argv[2:] or ["acp"]), sys.stdout, indent=2)
    print()
