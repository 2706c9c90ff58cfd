//! Compiles the AG-UI protobuf messages (`proto/ag_ui/*.proto`) with the `proto` feature, using a
//! pure-Rust protobuf compiler (no `protoc` needed).

fn main() {
    #[cfg(feature = "proto")]
    compile_protos();
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
