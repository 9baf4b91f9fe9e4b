use roundtable_protocol::model::{Discoverable, PrincipalKind};
use roundtable_testkit::postgres::{TestDatabase, select};

use super::*;

fn connect(io: &Io, url: &str) -> deadpool_postgres::Object {
    let config: tokio_postgres::Config = url.parse().unwrap();
    io.wait(pool(&config, 1).unwrap().get()).unwrap()
}

#[test]
fn migrations_apply_once_and_detect_edits_and_newer_schemas() {
    let database = TestDatabase::create();
    let io = Io::new().unwrap();
    let mut client = connect(&io, &database.url);
    let one: &[(i64, &str, &str)] = &[(1, "one", "CREATE TABLE a (x bigint)")];
    let two: &[(i64, &str, &str)] = &[
        (1, "one", "CREATE TABLE a (x bigint)"),
        (2, "two", "CREATE TABLE b (y bigint)"),
    ];
    assert_eq!(io.wait(migrate_with(&mut client, one, 1)).unwrap(), [1]);
    assert_eq!(io.wait(migrate_with(&mut client, two, 2)).unwrap(), [2]);
    assert_eq!(
        io.wait(migrate_with(&mut client, two, 3)).unwrap(),
        Vec::<i64>::new()
    );
    assert!(matches!(
        io.wait(migrate_with(&mut client, one, 4)),
        Err(StoreError::Migration(
            roundtable_sqlite::MigrationError::NewerSchema { found: 2, known: 1 }
        ))
    ));
    let edited: &[(i64, &str, &str)] = &[
        (1, "one", "CREATE TABLE a (x text)"),
        (2, "two", "CREATE TABLE b (y bigint)"),
    ];
    assert!(matches!(
        io.wait(migrate_with(&mut client, edited, 5)),
        Err(StoreError::Migration(
            roundtable_sqlite::MigrationError::Edited { version: 1 }
        ))
    ));
    // A failing migration leaves nothing of itself: it runs in one transaction.
    let broken: &[(i64, &str, &str)] = &[
        (1, "one", "CREATE TABLE a (x bigint)"),
        (2, "two", "CREATE TABLE b (y bigint)"),
        (
            3,
            "three",
            "CREATE TABLE c (z bigint); SELECT no_such_function()",
        ),
    ];
    assert!(io.wait(migrate_with(&mut client, broken, 6)).is_err());
    let tables = select(
        &database.url,
        "SELECT count(*) FROM pg_tables WHERE tablename = 'c'",
    );
    assert_eq!(tables[0][0], "0");
}

#[test]
fn hubs_opening_a_new_database_together_apply_each_migration_once() {
    let database = TestDatabase::create();
    let opened: Vec<_> = (0..3)
        .map(|seed| {
            let url = database.url.clone();
            std::thread::spawn(move || {
                let io = Io::new().unwrap();
                let mut client = connect(&io, &url);
                io.wait(migrate(&mut client, seed)).unwrap()
            })
        })
        .collect();
    let applied: Vec<i64> = opened
        .into_iter()
        .flat_map(|thread| thread.join().unwrap())
        .collect();
    assert_eq!(applied.len(), MIGRATIONS.len(), "{applied:?}");
}

#[test]
fn a_server_that_may_lose_commits_and_a_second_writer_are_refused() {
    let database = TestDatabase::create();
    let (store, _reader) = open(&database.url, &mut IdSource::seeded(1), 1).unwrap();
    let second = open(&database.url, &mut IdSource::seeded(2), 2);
    assert!(
        matches!(second, Err(StoreError::Postgres(PostgresError::InUse))),
        "{second:?}"
    );
    drop(store);
    // Let go of at once: the next hub opens.
    drop(open(&database.url, &mut IdSource::seeded(3), 3).unwrap());

    let name = &select(&database.url, "SELECT current_database()")[0][0];
    select(
        &database.url,
        &format!("ALTER DATABASE {name} SET synchronous_commit = off"),
    );
    let error = open(&database.url, &mut IdSource::seeded(4), 4).unwrap_err();
    assert!(
        error.to_string().contains("synchronous_commit = off"),
        "{error}"
    );
}

#[test]
fn a_bad_address_says_what_to_give() {
    let error = open("postgres://host:notaport/db", &mut IdSource::seeded(1), 1).unwrap_err();
    assert!(
        error.to_string().contains("postgres://user@host"),
        "{error}"
    );
}

#[test]
fn a_broken_writer_connection_is_replaced_and_the_transaction_in_flight_is_lost_whole() {
    let database = TestDatabase::create();
    let (mut store, _reader) = open(&database.url, &mut IdSource::seeded(1), 1).unwrap();
    let mut tx = store.transaction().unwrap();
    tx.insert_principal(&PrincipalRecord {
        id: "u".into(),
        kind: PrincipalKind::User,
        handle: "u".into(),
        name: "U".into(),
        owner: None,
        discoverable: Discoverable::Contacts,
        description: None,
        card: None,
        created_ms: 1,
        remote: None,
    })
    .unwrap();
    // The server ends the writer's session (as a restart would). Terminating only signals
    // the backends: wait until they are gone, or a commit under load may still reach one.
    select(
        &database.url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    );
    let others = "SELECT count(*) FROM pg_stat_activity
                  WHERE datname = current_database() AND pid <> pg_backend_pid()";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while select(&database.url, others)[0][0] != "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "the terminated sessions did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(tx.commit().is_err());
    let snapshot = store.load(2).unwrap();
    assert!(snapshot.principals.is_empty());
    let mut tx = store.transaction().unwrap();
    tx.append_event(&EventRecord {
        stream: StreamKey::Inbox("u".into()),
        seq: 1,
        id: "e1".into(),
        ts_ms: 3,
        from: "u".into(),
        kind: "room_added".into(),
        body: "{}".into(),
        client_key: None,
        mentions: vec![],
        pair: false,
    })
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(store.load(4).unwrap().heads.len(), 1);
}

/// Something else listening at the store's address (a web server, a test's listener on
/// the port a Unix-socket server left free) accepts and never answers: the connection
/// fails after its wait instead of holding the hub's start for ever.
#[test]
fn an_address_that_accepts_and_never_answers_fails_after_the_connection_wait() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let config: tokio_postgres::Config = format!("postgresql://postgres@127.0.0.1:{port}/postgres")
        .parse()
        .unwrap();
    let io = Io::new().unwrap();
    let pool = pool_waiting(&config, 1, std::time::Duration::from_millis(300)).unwrap();
    let error = io.wait(pool.get()).map(drop).map_err(StoreError::from);
    silent.set_nonblocking(true).unwrap();
    assert!(
        silent.accept().is_ok(),
        "the connection reached the listener"
    );
    match error {
        Err(StoreError::Postgres(PostgresError::NoAnswer(_))) => {}
        other => panic!("expected no answer, got {other:?}"),
    }
    let message = StoreError::Postgres(PostgresError::NoAnswer(10)).to_string();
    assert!(message.contains("host and port"), "{message}");
}
