//! Who a process runs as, on Windows: the security identifier (SID) of its token's user.
//!
//! Why: what Unix says with a uid (a socket's peer, a file's owner), Windows says with a
//! SID, a variable-length structure that only lives in buffers the system fills. Here it is
//! copied out, once, into an owned value that compares by content and turns into the text
//! form security descriptors are written in (`S-1-5-21-…`).

#![allow(
    unsafe_code,
    reason = "Win32 token and SID calls; every handle is checked and closed, every buffer sized by the system"
)]

use std::os::windows::io::{AsRawHandle as _, FromRawHandle as _, OwnedHandle};

use windows_sys::Win32::Foundation::{
    ERROR_INSUFFICIENT_BUFFER, GetLastError, HANDLE, HLOCAL, LocalFree,
};
use windows_sys::Win32::Security::Authorization::ConvertSidToStringSidW;
use windows_sys::Win32::Security::{
    GetLengthSid, GetTokenInformation, IsValidSid, PSID, TOKEN_QUERY, TOKEN_USER, TokenUser,
};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, OpenProcess, OpenProcessToken, PROCESS_QUERY_LIMITED_INFORMATION,
};

/// A user's security identifier, copied out of the system's buffers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserSid {
    /// The SID's bytes, in words: a SID's fields are 4-byte aligned.
    words: Vec<u32>,
    len: usize,
}

impl UserSid {
    /// The user this process runs as.
    pub fn current() -> std::io::Result<UserSid> {
        // SAFETY: the pseudo-handle of the current process needs no closing.
        of_process(unsafe { GetCurrentProcess() })
    }

    /// The user process `pid` runs as (it must still run, and be one we may query).
    pub fn of_process_id(pid: u32) -> std::io::Result<UserSid> {
        // SAFETY: a plain open; the handle returned is checked, then owned and closed.
        let process = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        if process.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a valid handle just returned to us, owned by nothing else.
        let process = unsafe { OwnedHandle::from_raw_handle(process) };
        of_process(process.as_raw_handle() as HANDLE)
    }

    fn as_psid(&self) -> PSID {
        self.words.as_ptr() as PSID
    }

    /// The SID in its text form, as security descriptors write it (`S-1-5-21-…`).
    pub fn to_text(&self) -> std::io::Result<String> {
        let mut text: *mut u16 = std::ptr::null_mut();
        // SAFETY: the SID is valid (checked when copied); the system allocates `text`, which
        // is read up to its terminating zero and freed below.
        if unsafe { ConvertSidToStringSidW(self.as_psid(), &mut text) } == 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `text` is a zero-terminated wide string the system allocated.
        let len = (0..)
            .take_while(|&at| unsafe { *text.add(at) } != 0)
            .count();
        // SAFETY: `len` wide characters were just read from it.
        let wide = unsafe { std::slice::from_raw_parts(text, len) };
        let found = String::from_utf16_lossy(wide);
        // SAFETY: allocated by the system with LocalAlloc, freed once.
        unsafe { LocalFree(text as HLOCAL) };
        Ok(found)
    }
}

/// The user of the process behind `process`.
fn of_process(process: HANDLE) -> std::io::Result<UserSid> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: `process` is valid for the call; `token` receives a handle, owned below.
    if unsafe { OpenProcessToken(process, TOKEN_QUERY, &mut token) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a valid handle just returned to us, owned by nothing else.
    let token = unsafe { OwnedHandle::from_raw_handle(token) };
    let token = token.as_raw_handle() as HANDLE;
    let mut needed = 0u32;
    // SAFETY: asking the size only (no buffer); the call fails with the size needed.
    let sized =
        unsafe { GetTokenInformation(token, TokenUser, std::ptr::null_mut(), 0, &mut needed) };
    // SAFETY: reading the calling thread's last error.
    if sized != 0 || unsafe { GetLastError() } != ERROR_INSUFFICIENT_BUFFER {
        return Err(std::io::Error::other("cannot size the token's user"));
    }
    // Words, so the structure (pointers inside) is aligned.
    let mut buffer = vec![0u64; (needed as usize).div_ceil(8)];
    // SAFETY: the buffer holds `needed` bytes, as the system asked.
    if unsafe {
        GetTokenInformation(
            token,
            TokenUser,
            buffer.as_mut_ptr().cast(),
            needed,
            &mut needed,
        )
    } == 0
    {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the system filled the buffer with a TOKEN_USER, whose SID points into it.
    let sid = unsafe { (*buffer.as_ptr().cast::<TOKEN_USER>()).User.Sid };
    // SAFETY: `sid` points into `buffer`, which lives until the end of this function.
    if unsafe { IsValidSid(sid) } == 0 {
        return Err(std::io::Error::other("the token's user is not a valid SID"));
    }
    // SAFETY: as above; the length is the SID's own.
    let len = unsafe { GetLengthSid(sid) } as usize;
    let mut words = vec![0u32; len.div_ceil(4)];
    // SAFETY: `len` bytes are read from a valid SID into a buffer of at least `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(sid.cast::<u8>(), words.as_mut_ptr().cast(), len) };
    Ok(UserSid { words, len })
}

impl UserSid {
    /// The SID's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialized bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_as_a_user_with_a_sid_text() {
        let me = UserSid::current().unwrap();
        let text = me.to_text().unwrap();
        assert!(text.starts_with("S-1-"), "{text}");
        assert_eq!(UserSid::of_process_id(std::process::id()).unwrap(), me);
    }
}
