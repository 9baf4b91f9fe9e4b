//! Opening a database another program writes (OpenCode's, a Copilot session's) so that
//! reading it can never get in that program's way: read-only, so no write and no write
//! lock; a reader of a write-ahead-logged database sees its last committed state, one of a
//! rollback-journaled database waits at most [`BUSY_WAIT`] for a writer to finish.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// How long a read waits for the writing program's transaction to end.
pub const BUSY_WAIT: Duration = Duration::from_secs(2);

/// Opens the database at `path` for reading only. A write-ahead-logged database whose
/// program is not running may lack its shared-memory file, which a read-only connection
/// cannot make: it is then read as it is on disk (`immutable`), which is all there is.
/// Fails on a file that is no database.
pub fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection = match Connection::open_with_flags(path, flags) {
        Ok(connection) => connection,
        Err(_) => {
            let uri = format!(
                "file:{}?mode=ro&immutable=1",
                path.display()
                    .to_string()
                    .replace('?', "%3f")
                    .replace('#', "%23")
            );
            Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)?
        }
    };
    connection.busy_timeout(BUSY_WAIT)?;
    connection.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
    Ok(connection)
}
