//! Which file a path names: what tells a file replaced under the same name from the one
//! that was there (a log rotated, a WAL that SQLite deleted and made again).
//!
//! Unix: the device and the inode. Windows: the volume's serial number and the file's index
//! on it, read from an open handle (std keeps them unstable).

use std::fs::Metadata;
use std::path::Path;

/// The identity of the file at `path` (whose `metadata` the caller has): (device, index);
/// (0, 0) when it cannot be read, which matches no other file's and never changes.
pub fn of(path: &Path, metadata: &Metadata) -> (u64, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let _ = path;
        (metadata.dev(), metadata.ino())
    }
    #[cfg(windows)]
    {
        let _ = metadata;
        std::fs::File::open(path)
            .and_then(|file| winapi_util::file::information(&file))
            .map(|info| (info.volume_serial_number(), info.file_index()))
            .unwrap_or((0, 0))
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (path, metadata);
        (0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_replaced_under_its_name_is_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let identity = || of(&path, &std::fs::metadata(&path).unwrap());
        std::fs::write(&path, "one\n").unwrap();
        let first = identity();
        assert_ne!(first, (0, 0));
        // Written again in place: the same file.
        std::fs::write(&path, "one\ntwo\n").unwrap();
        assert_eq!(identity(), first);
        // Replaced by another file renamed over it (made while the first still was, so
        // the two cannot share an index).
        let other = dir.path().join("next.jsonl");
        std::fs::write(&other, "three\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_ne!(identity(), first);
    }
}
