//! Files and directories only their owner may read and write: profiles and their tokens,
//! caches, the hub's data, its TLS key.
//!
//! Why a module: on Unix the guarantee is a mode (0700 directories, 0600 files), given as a
//! file is created, so no other user ever finds it open. Windows has no modes: a file takes
//! its directory's access list, which under the user's own folders (`%LOCALAPPDATA%`) is
//! already the user's (with SYSTEM's and the Administrators'), but elsewhere (a
//! `ROUNDTABLE_HOME` on another drive, a hub's `--data`) may let every user read. There, each
//! directory and file is given a protected access list with one entry, for its user; what is
//! created in such a directory later (SQLite's `-wal` and `-shm` beside a database) inherits
//! it.

use std::fs::{File, OpenOptions};
use std::path::Path;

/// Creates `dir` and its missing parents, and makes `dir` its owner's alone (its parents
/// are left as they are).
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)?;
    restrict(dir)
}

/// Opens `path` with `options`, a file created this way being its owner's alone from its
/// creation (on Windows, from the moment it is open: before anything is written to it).
pub fn open(options: &mut OpenOptions, path: &Path) -> std::io::Result<File> {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, 0o600);
    let file = options.open(path)?;
    #[cfg(windows)]
    imp::restrict(path, false)?;
    Ok(file)
}

/// Makes an existing file or directory its owner's alone (one that another program
/// created, or that was created before it had to be).
pub fn restrict(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = if path.is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(windows)]
    {
        imp::restrict(path, path.is_dir())
    }
}

/// Whether `path` is its owner's alone: on Unix, no permission for its group or others; on
/// Windows, every entry of its access list allows this process's user, and nothing else.
pub fn is_owner_only(path: &Path) -> std::io::Result<bool> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        Ok(std::fs::metadata(path)?.permissions().mode() & 0o077 == 0)
    }
    #[cfg(windows)]
    {
        imp::is_owner_only(path)
    }
}

#[cfg(windows)]
#[allow(
    unsafe_code,
    reason = "Win32 security-descriptor calls; every allocation is checked and freed once"
)]
mod imp {
    use std::os::windows::ffi::OsStrExt as _;
    use std::path::Path;

    use windows_sys::Win32::Foundation::{ERROR_SUCCESS, HLOCAL, LocalFree};
    use windows_sys::Win32::Security::Authorization::{
        ConvertSecurityDescriptorToStringSecurityDescriptorW,
        ConvertStringSecurityDescriptorToSecurityDescriptorW, GetNamedSecurityInfoW,
        SDDL_REVISION_1, SE_FILE_OBJECT, SetNamedSecurityInfoW,
    };
    use windows_sys::Win32::Security::{
        ACL, DACL_SECURITY_INFORMATION, GetSecurityDescriptorDacl,
        PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR,
    };

    use crate::windows_user::UserSid;

    fn wide(path: &Path) -> Vec<u16> {
        path.as_os_str().encode_wide().chain([0]).collect()
    }

    /// A security descriptor the system allocated, freed on drop.
    struct Descriptor(PSECURITY_DESCRIPTOR);

    impl Drop for Descriptor {
        fn drop(&mut self) {
            // SAFETY: allocated by the system with LocalAlloc, freed once.
            unsafe { LocalFree(self.0 as HLOCAL) };
        }
    }

    /// Gives `path` a protected access list with one entry: full access for this process's
    /// user (inherited by what is created in it, for a directory).
    pub(super) fn restrict(path: &Path, directory: bool) -> std::io::Result<()> {
        let user = UserSid::current()?;
        let inherit = if directory { "OICI" } else { "" };
        let sddl: Vec<u16> = format!("D:P(A;{inherit};FA;;;{})", user.to_text()?)
            .encode_utf16()
            .chain([0])
            .collect();
        let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: `sddl` is zero-terminated; the descriptor is allocated by the system and
        // owned by `Descriptor` below.
        if unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                sddl.as_ptr(),
                SDDL_REVISION_1,
                &mut descriptor,
                std::ptr::null_mut(),
            )
        } == 0
        {
            return Err(std::io::Error::last_os_error());
        }
        let descriptor = Descriptor(descriptor);
        let (mut present, mut defaulted) = (0, 0);
        let mut acl: *mut ACL = std::ptr::null_mut();
        // SAFETY: the descriptor is valid; `acl` points into it, which outlives its use.
        if unsafe {
            GetSecurityDescriptorDacl(descriptor.0, &mut present, &mut acl, &mut defaulted)
        } == 0
        {
            return Err(std::io::Error::last_os_error());
        }
        let name = wide(path);
        // SAFETY: `name` is zero-terminated; `acl` is valid while `descriptor` lives.
        let set = unsafe {
            SetNamedSecurityInfoW(
                name.as_ptr(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                acl,
                std::ptr::null(),
            )
        };
        if set != ERROR_SUCCESS {
            return Err(std::io::Error::from_raw_os_error(set as i32));
        }
        Ok(())
    }

    /// Whether every entry of `path`'s access list is an allowance for this process's user
    /// (read in the text form of security descriptors: `D:P(A;…;…;;;S-1-5-…)`).
    pub(super) fn is_owner_only(path: &Path) -> std::io::Result<bool> {
        let user = UserSid::current()?.to_text()?;
        let name = wide(path);
        let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: `name` is zero-terminated; the descriptor is allocated by the system and
        // owned by `Descriptor` below; the other out-pointers are not asked for.
        let got = unsafe {
            GetNamedSecurityInfoW(
                name.as_ptr(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut descriptor,
            )
        };
        if got != ERROR_SUCCESS {
            return Err(std::io::Error::from_raw_os_error(got as i32));
        }
        let descriptor = Descriptor(descriptor);
        let mut text: *mut u16 = std::ptr::null_mut();
        // SAFETY: the descriptor is valid; the system allocates `text`, freed below.
        if unsafe {
            ConvertSecurityDescriptorToStringSecurityDescriptorW(
                descriptor.0,
                SDDL_REVISION_1,
                DACL_SECURITY_INFORMATION,
                &mut text,
                std::ptr::null_mut(),
            )
        } == 0
        {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `text` is a zero-terminated wide string the system allocated.
        let len = (0..)
            .take_while(|&at| unsafe { *text.add(at) } != 0)
            .count();
        // SAFETY: `len` wide characters were just read from it.
        let sddl = String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(text, len) });
        // SAFETY: allocated by the system with LocalAlloc, freed once.
        unsafe { LocalFree(text as HLOCAL) };
        Ok(owner_only_sddl(&sddl, &user))
    }

    /// Whether a descriptor's text allows `user` and no one else: each entry `(A;…;;;SID)`.
    pub(super) fn owner_only_sddl(sddl: &str, user: &str) -> bool {
        let Some(dacl) = sddl.strip_prefix("D:") else {
            return false;
        };
        let entries: Vec<&str> = dacl
            .split('(')
            .skip(1)
            .map(|entry| entry.trim_end_matches(')'))
            .collect();
        !entries.is_empty()
            && entries.iter().all(|entry| {
                let fields: Vec<&str> = entry.split(';').collect();
                fields.len() >= 6 && fields[0] == "A" && fields[5] == user
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_created_here_is_its_owner_s_alone() {
        let root = std::env::temp_dir().join(format!("rt-private-{}", std::process::id()));
        let dir = root.join("profiles").join("dana");
        create_dir(&dir).unwrap();
        let token = dir.join("token");
        let mut file = open(OpenOptions::new().write(true).create_new(true), &token).unwrap();
        std::io::Write::write_all(&mut file, b"rt_secret").unwrap();
        drop(file);
        // One made by another program, then restricted.
        let loose = root.join("loose.txt");
        std::fs::write(&loose, "x").unwrap();
        restrict(&loose).unwrap();
        // Wine takes an access list and answers its own default when asked it back: what
        // was set can only be read back on Windows itself.
        if !crate::wine::is_wine() {
            for path in [&dir, &token, &loose] {
                assert!(is_owner_only(path).unwrap(), "{}", path.display());
            }
        }
        let _ = std::fs::remove_dir_all(root);
    }

    #[cfg(unix)]
    #[test]
    fn on_unix_a_file_others_may_read_is_not_its_owner_s_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = std::env::temp_dir().join(format!("rt-private-open-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let open_file = root.join("open.txt");
        std::fs::write(&open_file, "x").unwrap();
        std::fs::set_permissions(&open_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!is_owner_only(&open_file).unwrap());
        let _ = std::fs::remove_dir_all(root);
    }

    #[cfg(windows)]
    #[test]
    fn a_descriptor_allowing_anyone_else_is_not_the_owner_s_alone() {
        let me = "S-1-5-21-1-2-3-1001";
        assert!(imp::owner_only_sddl(&format!("D:P(A;OICI;FA;;;{me})"), me));
        assert!(imp::owner_only_sddl(&format!("D:AI(A;ID;FA;;;{me})"), me));
        assert!(!imp::owner_only_sddl(
            &format!("D:P(A;;FA;;;{me})(A;;FR;;;WD)"),
            me
        ));
        assert!(!imp::owner_only_sddl("D:P(A;;FA;;;S-1-5-21-9)", me));
        assert!(!imp::owner_only_sddl("D:", me));
    }
}
