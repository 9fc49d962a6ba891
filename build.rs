// Which transport each platform gets is decided here, in one place: `native_socket` (a
// non-blocking TCP socket polled by libuv on Node's own loop: src/transport.rs, src/uv.rs,
// src/bindings/socket.rs) on Linux and macOS; everywhere else (Windows, and any other target)
// amqp:// goes through Node's own `net.connect`, the stream path TLS takes too.
// AMQPLIB_RS_STREAM_ONLY=1 builds without the native socket on Linux as well, so that the
// crate as Windows gets it is compiled and checked here.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(native_socket)");
    println!("cargo::rerun-if-env-changed=AMQPLIB_RS_STREAM_ONLY");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let stream_only = std::env::var("AMQPLIB_RS_STREAM_ONLY").is_ok_and(|v| v == "1");
    if (os == "linux" || os == "macos") && !stream_only {
        println!("cargo::rustc-cfg=native_socket");
    }
    napi_build::setup();
}
