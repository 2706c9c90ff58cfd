//! The release (`dist-workspace.toml`, built by dist) and what reads it agree: `cargo binstall`'s
//! metadata in `Cargo.toml` names the archives dist makes, for every target, and dist builds
//! features the crate has. (`scripts/release-plan` runs dist itself on them.)

use toml::{Table, Value};

fn read(file: &str) -> Table {
    let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.parse()
        .unwrap_or_else(|e| panic!("{path} is not TOML: {e}"))
}

fn table<'a>(table: &'a Table, path: &[&str]) -> &'a Table {
    path.iter().fold(table, |at, key| {
        at.get(*key)
            .and_then(Value::as_table)
            .unwrap_or_else(|| panic!("no table {path:?}"))
    })
}

/// dist's configuration: the `[dist]` table of `dist-workspace.toml`.
fn dist() -> Table {
    table(&read("dist-workspace.toml"), &["dist"]).clone()
}

fn string<'a>(table: &'a Table, key: &str) -> Option<&'a str> {
    table.get(key).and_then(Value::as_str)
}

fn strings<'a>(table: &'a Table, key: &str) -> Vec<&'a str> {
    table
        .get(key)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no list {key}"))
        .iter()
        .map(|value| value.as_str().expect("a string"))
        .collect()
}

/// binstall's name for the format of an archive dist makes with this suffix.
fn binstall_format(suffix: &str) -> &'static str {
    match suffix {
        ".tar.gz" => "tgz",
        ".tar.xz" => "txz",
        ".tar.zst" => "tzstd",
        ".zip" => "zip",
        other => panic!("dist makes no {other} archive"),
    }
}

#[test]
fn binstall_finds_the_archive_dist_makes_for_every_target() {
    let (dist, cargo) = (dist(), read("Cargo.toml"));
    let binstall = table(&cargo, &["package", "metadata", "binstall"]);

    // dist names an archive `{package}-{target}{suffix}` and uploads it to the release of the tag
    // `v{version}` (a tag of the one package).
    assert_eq!(
        string(binstall, "pkg-url"),
        Some("{ repo }/releases/download/v{ version }/{ name }-{ target }{ archive-suffix }")
    );
    let overrides = binstall.get("overrides").and_then(Value::as_table);
    for target in strings(&dist, "targets") {
        let windows = target.contains("-windows-");
        // Defaults of dist 0.34: a Windows archive is a .zip, any other a .tar.xz.
        let suffix = if windows {
            string(&dist, "windows-archive").unwrap_or(".zip")
        } else {
            string(&dist, "unix-archive").unwrap_or(".tar.xz")
        };
        let own = overrides
            .and_then(|overrides| overrides.get(target))
            .and_then(Value::as_table);
        let setting = |key| {
            own.and_then(|own| string(own, key))
                .or_else(|| string(binstall, key))
                .unwrap_or_else(|| panic!("no binstall {key} for {target}"))
        };
        assert_eq!(
            setting("pkg-fmt"),
            binstall_format(suffix),
            "binstall reads {target}'s {suffix} archive as another format"
        );
        // A zip holds the binary at its root; a tarball under a directory named as the archive.
        let bin_dir = if suffix == ".zip" {
            "{ bin }{ binary-ext }"
        } else {
            "{ name }-{ target }/{ bin }{ binary-ext }"
        };
        assert_eq!(
            setting("bin-dir"),
            bin_dir,
            "binstall looks for the binary elsewhere in {target}'s archive"
        );
    }
}

#[test]
fn the_release_builds_the_command_with_features_the_crate_has() {
    let (dist, cargo) = (dist(), read("Cargo.toml"));
    let features = table(&cargo, &["features"]);
    let built = strings(&dist, "features");
    assert!(
        built.contains(&"cli"),
        "the release builds no command: {built:?}"
    );
    for feature in built {
        assert!(features.contains_key(feature), "no feature {feature}");
    }
    // The profile dist builds with.
    assert_eq!(
        string(table(&cargo, &["profile", "dist"]), "inherits"),
        Some("release")
    );
}
