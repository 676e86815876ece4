#![no_main]
// See src/fuzzing.rs.
libfuzzer_sys::fuzz_target!(|data: &[u8]| electd::fuzzing::peer_message(data));
