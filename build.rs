//! Tells the tests whether `DATABASE_URL` is set.

fn main() {
    // The tests' PostgreSQL halves need `DATABASE_URL`; without it, each durable test file shows
    // one ignored test that says so in the summary. Only in the repository (the published crate
    // has no `.ci`): a crate depending on this one is not rebuilt when its `DATABASE_URL` changes.
    println!("cargo::rustc-check-cfg=cfg(no_database_url)");
    if std::path::Path::new(".ci/run").exists() {
        println!("cargo::rerun-if-env-changed=DATABASE_URL");
        if std::env::var_os("DATABASE_URL").is_none() {
            println!("cargo::rustc-cfg=no_database_url");
        }
    }
}
