//! libFuzzer target: arbitrary bytes as a connection's input stream, through the frame decoder,
//! the handshake record, RequestHeader and Request::decode. See `zkit_proto_fuzz::exercise`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| zkit_proto_fuzz::exercise(data));
