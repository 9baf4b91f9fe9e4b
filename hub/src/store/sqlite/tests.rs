use super::*;

#[test]
fn the_flusher_relaxes_commits_and_syncs_the_wal_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hub.sqlite3");
    let (mut store, _reader) = open(&path, &mut IdSource::seeded(4), 1).unwrap();
    let synchronous = |store: &SqliteStore| -> i64 {
        store
            .conn
            .query_row("PRAGMA synchronous", [], |row| row.get(0))
            .unwrap()
    };
    assert_eq!(synchronous(&store), 2, "FULL until the flusher takes over");
    let mut flush = store.flusher().unwrap();
    assert_eq!(synchronous(&store), 1, "NORMAL: the flusher syncs");
    flush.flush().unwrap();
    #[cfg(target_os = "linux")]
    {
        let wal = std::fs::canonicalize(format!("{}-wal", path.display())).unwrap();
        let open_files: Vec<_> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            .collect();
        assert!(
            open_files.contains(&wal),
            "the flush holds the WAL file open: {open_files:?}"
        );
    }
}

#[test]
fn a_schema_2_database_keeps_its_client_keys_after_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hub.sqlite3");
    {
        let mut conn = Connection::open(&path).unwrap();
        roundtable_sqlite::migrate(&mut conn, &MIGRATIONS[..2], 1).unwrap();
        conn.execute_batch(
            "INSERT INTO principals (id, kind, handle, name, discoverable, created_ms)
                 VALUES ('u', 'user', 'u', 'U', 'contacts', 1);
             INSERT INTO rooms (id, creator, created_ms) VALUES ('r', 'u', 1);
             INSERT INTO events (stream, seq, id, ts_ms, sender, kind, body, client_key, pair)
                 VALUES ('r', 1, 'e1', 5, 'u', 'message', '{}', 'key-before-upgrade', 0),
                        ('r', 2, 'e2', 6, 'u', 'room_updated', '{}', NULL, 0);",
        )
        .unwrap();
    }
    let (mut store, _reader) = open(&path, &mut IdSource::seeded(4), 10).unwrap();
    let index: i64 = store
        .conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'events_client_key'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(index, 0, "migration 3 drops the unique index");
    let keys = store.load(10).unwrap().sent_keys;
    assert_eq!(
        keys,
        vec![SentKeyRecord {
            sender: "u".into(),
            client_key: "key-before-upgrade".into(),
            room: "r".into(),
            seq: 1,
            ts_ms: 5,
        }]
    );
}

#[test]
fn a_schema_3_database_keeps_its_invites_usable_after_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hub.sqlite3");
    {
        let mut conn = Connection::open(&path).unwrap();
        roundtable_sqlite::migrate(&mut conn, &MIGRATIONS[..3], 1).unwrap();
        conn.execute(
            "INSERT INTO principals (id, kind, handle, name, discoverable, created_ms)
                 VALUES ('u', 'user', 'u', 'U', 'contacts', 1)",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO invites (id, code_hash, creator, max_uses, uses, expires_ms, created_ms)
                 VALUES ('i_1', ?1, 'u', 2, 1, 900, 5)",
            [&[3u8; 32][..]],
        )
        .unwrap();
    }
    let (mut store, _reader) = open(&path, &mut IdSource::seeded(4), 10).unwrap();
    let invites = store.load(10).unwrap().invites;
    assert_eq!(
        invites,
        vec![InviteRecord {
            id: "i_1".into(),
            code_hash: TokenHash([3; 32]),
            creator: "u".into(),
            room: None,
            max_uses: 2,
            uses: 1,
            expires_ms: 900,
            created_ms: 5,
            revoked_ms: None,
        }],
        "an invite from before withdrawals is not withdrawn"
    );
}

#[test]
fn a_schema_4_audit_log_still_verifies_after_the_upgrade_and_extends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hub.sqlite3");
    let first = roundtable_engine::audit::next_entry(
        &(0, roundtable_engine::audit::GENESIS.to_owned()),
        5,
        "p_dana",
        "room_create",
        Some("r_1".into()),
        None,
        None,
    );
    {
        let mut conn = Connection::open(&path).unwrap();
        roundtable_sqlite::migrate(&mut conn, &MIGRATIONS[..4], 1).unwrap();
        conn.execute(
            "INSERT INTO audit (n, ts_ms, principal, action, target, result, code, hash)
                 VALUES (1, 5, 'p_dana', 'room_create', 'r_1', 'ok', NULL, ?1)",
            [&first.hash],
        )
        .unwrap();
    }
    let (mut store, reader) = open(&path, &mut IdSource::seeded(4), 10).unwrap();
    let head = store.load(10).unwrap().audit_head;
    assert_eq!(head, (1, first.hash.clone()));
    let folded = roundtable_engine::audit::next_entry(
        &head,
        6,
        "p_eve",
        "send",
        Some("r_2".into()),
        Some("not_member"),
        Some(12),
    );
    let mut tx = store.transaction().unwrap();
    tx.append_audit(&folded).unwrap();
    tx.commit().unwrap();
    assert_eq!(reader.audit_head().unwrap(), Some((2, folded.hash.clone())));
    let mut check = roundtable_engine::audit::ChainCheck::expecting(1, &first.hash);
    read_audit_log(&path, |entry| check.feed(&entry)).unwrap();
    assert_eq!(check.finish(), Ok((2, folded.hash.clone())));
    let mut entries = Vec::new();
    read_audit_log(&path, |entry| {
        entries.push(entry);
        true
    })
    .unwrap();
    assert_eq!(entries[0].count, None);
    assert_eq!(entries[1].count, Some(12));
}

#[test]
fn an_in_memory_database_has_no_flusher() {
    let mut store = SqliteStore {
        conn: Connection::open_in_memory().unwrap(),
    };
    assert!(store.flusher().is_err());
}

#[cfg(unix)]
#[test]
fn the_database_and_its_wal_are_the_owner_s_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("hub.sqlite3");
    // A database made before files were restricted is restricted when opened again.
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (mut store, _reader) = open(&path, &mut IdSource::seeded(4), 1).unwrap();
    store.transaction().unwrap().commit().unwrap();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(&path), 0o600);
    assert_eq!(
        mode(std::path::Path::new(&format!("{}-wal", path.display()))),
        0o600
    );
}
