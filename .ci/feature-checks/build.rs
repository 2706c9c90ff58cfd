//! Nothing to build: the build-dependencies are what this package is for (Cargo.toml).

fn main() {}
