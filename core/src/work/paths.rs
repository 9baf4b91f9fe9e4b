//! The one way a path in any agent CLI's log becomes the file it names: made absolute against
//! the working directory the log gives, `.` and `..` resolved. It is lexical (the files may be
//! on another machine, or gone), so `/a/b/../c` and `/a/c` are one file whichever CLI wrote
//! which, and a component's files match whatever spelling the agent used.
//!
//! POSIX paths split on `/` only (a file name may hold a backslash); Windows paths (a drive,
//! a UNC share, or backslashes and no slash) split on both and are written with `\`.

/// `path` as the file it names: resolved against `cwd` when relative and a directory is
/// known, `.` and `..` resolved lexically (never above the root; a relative path with no
/// directory keeps its leading `..`). A path starting with `~` is kept as written: whose
/// home it means is not known here.
pub fn resolve(cwd: Option<&str>, path: &str) -> String {
    if path.starts_with('~') {
        return path.to_owned();
    }
    match cwd {
        Some(dir) if !is_absolute(path) && !dir.is_empty() => normalize(&join(dir, path)),
        _ => normalize(path),
    }
}

/// Whether a path is absolute, for POSIX (`/x`) or Windows (`C:\x`, `\x`, `\\server\x`).
pub fn is_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    matches!(bytes.first(), Some(b'/' | b'\\'))
        || (bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && matches!(bytes[2], b'/' | b'\\'))
}

/// `path` after the directory `dir`, unless it is absolute.
pub fn join(dir: &str, path: &str) -> String {
    if is_absolute(path) {
        return path.to_owned();
    }
    let separator = if is_windows_style(dir) { '\\' } else { '/' };
    let mut joined = String::with_capacity(dir.len() + 1 + path.len());
    joined.push_str(dir);
    if !dir.ends_with(['/', '\\']) {
        joined.push(separator);
    }
    joined.push_str(path);
    joined
}

fn is_windows_style(path: &str) -> bool {
    let bytes = path.as_bytes();
    (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
        || path.starts_with("\\\\")
        || (path.contains('\\') && !path.contains('/'))
}

/// The root a path starts with, as it is written back, and the rest: `/`, `C:\`, `C:` (a
/// drive's current directory), `\\server\share\`, `\`, or none.
fn split_root(path: &str, windows: bool) -> (String, &str) {
    let bytes = path.as_bytes();
    if !windows {
        return match path.strip_prefix('/') {
            Some(rest) => ("/".to_owned(), rest),
            None => (String::new(), path),
        };
    }
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return match bytes.get(2) {
            Some(b'/' | b'\\') => (format!("{}\\", &path[..2]), &path[3..]),
            _ => (path[..2].to_owned(), &path[2..]),
        };
    }
    if let Some(unc) = path.strip_prefix("\\\\") {
        // `\\server\share\`: the server and the share are the root, kept whole.
        let mut parts = unc.splitn(3, ['\\', '/']);
        let server = parts.next().unwrap_or_default();
        let share = parts.next().unwrap_or_default();
        let rest = parts.next().unwrap_or_default();
        return (format!("\\\\{server}\\{share}\\"), rest);
    }
    match path.strip_prefix(['/', '\\']) {
        Some(rest) => ("\\".to_owned(), rest),
        None => (String::new(), path),
    }
}

/// Lexical normalisation: empty and `.` components dropped, `..` removes the component
/// before it (never the root; a relative path keeps its leading `..`).
fn normalize(path: &str) -> String {
    let windows = is_windows_style(path);
    let separator = if windows { '\\' } else { '/' };
    let (root, rest) = split_root(path, windows);
    // Above a relative path's start is somewhere: its `..` stay (also on `C:x`, relative
    // to the drive's current directory). Above a root is nowhere.
    let relative = !is_absolute(path);
    let mut parts: Vec<&str> = Vec::new();
    let components: Box<dyn Iterator<Item = &str>> = if windows {
        Box::new(rest.split(['/', '\\']))
    } else {
        Box::new(rest.split('/'))
    };
    for part in components {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if relative => parts.push(".."),
                _ => {}
            },
            part => parts.push(part),
        }
    }
    let mut normalized = root;
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            normalized.push(separator);
        }
        normalized.push_str(part);
    }
    if normalized.is_empty() {
        normalized.push('.');
    }
    normalized
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_has_one_name_whatever_the_spelling() {
        let cases = [
            // Relative, against the working directory.
            (Some("/home/dev/app"), "src/a.rs", "/home/dev/app/src/a.rs"),
            (Some("/p/q/"), "./src/../b.rs", "/p/q/b.rs"),
            (
                Some("/home/dev/app/"),
                "./src/./a.rs",
                "/home/dev/app/src/a.rs",
            ),
            (Some("/home/dev/app"), "../lib/a.rs", "/home/dev/lib/a.rs"),
            (Some("/p"), "../../../../d", "/d"),
            (Some("/"), "a", "/a"),
            // A relative working directory (a shell's `cd sub`) still joins.
            (Some("sub/dir"), "f.rs", "sub/dir/f.rs"),
            // Absolute: normalised too, so two CLIs' spellings meet.
            (Some("/p"), "/abs/a.rs", "/abs/a.rs"),
            (Some("/home/dev/app"), "/abs//path/./x", "/abs/path/x"),
            (None, "/a/b/../c", "/a/c"),
            // No directory known.
            (None, "a.rs", "a.rs"),
            (None, "./src/../a.rs", "a.rs"),
            (None, "../a.rs", "../a.rs"),
            (None, "", "."),
            // Whose home `~` is, is not known here.
            (Some("/p"), "~/notes.md", "~/notes.md"),
            // Windows: drives, shares, either separator.
            (Some(r"C:\git\x"), r"src\main.rs", r"C:\git\x\src\main.rs"),
            (Some(r"C:\work\app"), "../lib/a.rs", r"C:\work\lib\a.rs"),
            (Some(r"C:\git\x"), "C:/other/y.rs", r"C:\other\y.rs"),
            (Some("/home/dev/app"), r"D:\x\y", r"D:\x\y"),
            (
                Some(r"\\server\share\dir"),
                "e.rs",
                r"\\server\share\dir\e.rs",
            ),
            (None, r"\\server\share\..\..\f.rs", r"\\server\share\f.rs"),
            (None, r"C:..\x", r"C:..\x"),
        ];
        for (cwd, path, expected) in cases {
            assert_eq!(resolve(cwd, path), expected, "{path} in {cwd:?}");
        }
    }

    #[test]
    fn a_resolved_path_resolves_to_itself() {
        for path in [
            "/a/b/../c",
            "a/./b",
            "../../x",
            r"C:\a\..\b",
            r"\\s\h\x\..\y",
            "/",
        ] {
            let once = resolve(None, path);
            assert_eq!(resolve(None, &once), once, "{path}");
        }
    }
}
