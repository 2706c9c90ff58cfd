//! Compiles the AG-UI protobuf messages (`proto/ag_ui/*.proto`) with the `proto` feature, using a
//! pure-Rust protobuf compiler (no `protoc` needed); tells the tests whether `DATABASE_URL` is set.

fn main() {
    #[cfg(feature = "proto")]
    compile_protos();
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

#[cfg(feature = "proto")]
fn compile_protos() {
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(["ag_ui/events.proto"], ["proto"])
        .unwrap_or_else(|e| panic!("proto/ag_ui does not compile: {e}"));
    prost_build::Config::new()
        .compile_fds(descriptors)
        .unwrap_or_else(|e| panic!("prost could not generate the AG-UI messages: {e}"));
}
