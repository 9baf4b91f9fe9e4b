//! Fuzzes the decoder every client frame goes through: it must never panic, every decoded
//! frame must re-encode to something that decodes to itself, and every refusal must carry
//! one of the two codes the protocol allows for a frame that is not a valid command.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_protocol::ErrorCode;
use roundtable_protocol::decode::decode_client_frame;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match decode_client_frame(text) {
        Ok(frame) => {
            let again = decode_client_frame(&frame.to_json()).expect("re-encoded frame decodes");
            assert_eq!(again, frame);
        }
        Err(error) => {
            assert!(matches!(error.code, ErrorCode::BadFrame | ErrorCode::Unsupported));
        }
    }
});
