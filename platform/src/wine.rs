//! Whether this program is a Windows build running under Wine.
//!
//! Why: the Windows builds' tests run under Wine on Linux, which emulates most of what they
//! use and answers a few questions differently from Windows (it accepts a file's access
//! list and reports its own default when asked it back). A test skips such a check under
//! Wine, saying why where it does; nothing outside tests asks.

/// Whether this process runs under Wine (Wine's `ntdll` exports `wine_get_version`, which
/// Windows's does not); never on other systems.
pub fn is_wine() -> bool {
    imp::is_wine()
}

#[cfg(windows)]
#[allow(unsafe_code, reason = "looking up an export of the loaded ntdll")]
mod imp {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};

    pub(super) fn is_wine() -> bool {
        // SAFETY: ntdll is loaded in every process; both names are zero-terminated.
        unsafe {
            let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
            !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
        }
    }
}

#[cfg(not(windows))]
mod imp {
    pub(super) fn is_wine() -> bool {
        false
    }
}
