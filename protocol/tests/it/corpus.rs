//! Every input of the fuzz target's seed corpus (and any crash it found and we fixed) goes
//! through the decoder: each either decodes or gets a classified error, and never panics.

use std::path::PathBuf;

use roundtable_protocol::ErrorCode;
use roundtable_protocol::decode::decode_client_frame;

#[test]
fn fuzz_corpus_decodes_or_is_classified() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/decode_client_frame");
    let mut entries: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|error| panic!("the seed corpus {} is missing: {error}", root.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    assert!(
        entries.len() >= 20,
        "the seed corpus has only {} files",
        entries.len()
    );
    let (mut decoded, mut refused) = (0, 0);
    for path in entries {
        let bytes = std::fs::read(&path).unwrap();
        let Ok(text) = std::str::from_utf8(&bytes) else {
            // Binary frames never reach the decoder: the hub answers them with bad_frame.
            refused += 1;
            continue;
        };
        match decode_client_frame(text) {
            Ok(frame) => {
                // A decoded frame re-encodes and decodes to itself.
                let again = decode_client_frame(&frame.to_json()).unwrap();
                assert_eq!(again, frame, "{}", path.display());
                decoded += 1;
            }
            Err(error) => {
                assert!(
                    matches!(error.code, ErrorCode::BadFrame | ErrorCode::Unsupported),
                    "{}: {error:?}",
                    path.display()
                );
                assert!(!error.msg.is_empty());
                refused += 1;
            }
        }
    }
    assert!(
        decoded > 0 && refused > 0,
        "decoded {decoded}, refused {refused}"
    );
}
