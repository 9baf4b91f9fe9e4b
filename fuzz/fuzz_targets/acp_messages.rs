//! An ACP agent's stdout of any bytes: every line is read without a panic, and what it
//! says (an update, a permission asked, a turn's end) too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_core::acp::updates::{
    Incoming, read_line, read_permission, read_turn_end, read_update,
};

fuzz_target!(|data: &[u8]| {
    for line in data.split(|&byte| byte == b'\n') {
        match read_line(line) {
            Ok(Incoming::Notification { params, .. }) => {
                let _ = read_update(&params, "/work/app");
            }
            Ok(Incoming::Request { params, .. }) => {
                let _ = read_permission(&params);
            }
            Ok(Incoming::Response { result: Ok(result), .. }) => {
                let _ = read_turn_end(&result);
            }
            _ => {}
        }
    }
});
