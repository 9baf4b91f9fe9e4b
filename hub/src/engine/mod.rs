//! The engine's tests, on the hub's real stores: the engine is a crate of its own
//! (`roundtable-engine`, without I/O), and these run it over SQLite and PostgreSQL, which
//! live here.

mod tests;

pub(crate) mod test_support {
    //! A real store and an engine over it: SQLite in a temporary directory, or a new
    //! PostgreSQL database when `ROUNDTABLE_TEST_HUB_STORE` is `postgres` (as
    //! `scripts/test.sh` runs these tests a second time), so the engine's decisions are
    //! checked on both stores.

    use roundtable_engine::ids::IdSource;
    use roundtable_engine::state::HubState;
    use roundtable_engine::store::WriteTx;
    use roundtable_engine::*;
    use roundtable_protocol::client::ClientFrame;

    use crate::store::{ReadStore, Store, postgres, sqlite};

    /// Where a fixture's store keeps its data: it lives as long as the fixture.
    enum StoreHome {
        Dir(tempfile::TempDir),
        Postgres(roundtable_testkit::postgres::TestDatabase),
    }

    pub struct Fixture {
        home: StoreHome,
        pub store: Box<dyn Store>,
        pub reader: Box<dyn ReadStore>,
        pub engine: Engine,
        pub now_ms: i64,
        next_conn: u64,
        /// Another hub process's memory of the same store, kept only from the changes
        /// each transaction shares (see [`crate::replication`]): it must always equal the
        /// engine's, which every test checks as it ends.
        pub replica: HubState,
        /// Every `(sender, client_key)` a transaction stored.
        keys: Vec<(String, String)>,
    }

    impl Fixture {
        pub fn new() -> Fixture {
            let mut ids = IdSource::seeded(1);
            let on_postgres =
                std::env::var("ROUNDTABLE_TEST_HUB_STORE").as_deref() == Ok("postgres");
            let (home, mut store, reader): (_, Box<dyn Store>, Box<dyn ReadStore>) = if on_postgres
            {
                let database = roundtable_testkit::postgres::TestDatabase::create();
                let (store, reader) = postgres::open(&database.url, &mut ids, 1_000).unwrap();
                (
                    StoreHome::Postgres(database),
                    Box::new(store),
                    Box::new(reader),
                )
            } else {
                let dir = tempfile::tempdir().unwrap();
                let (store, reader) =
                    sqlite::open(&dir.path().join("hub.sqlite3"), &mut ids, 1_000).unwrap();
                (StoreHome::Dir(dir), Box::new(store), Box::new(reader))
            };
            let snapshot = store.load(1).unwrap();
            let replica = HubState::from_snapshot(store.load(1).unwrap());
            Fixture {
                home,
                store,
                reader,
                engine: Engine::new(snapshot, ids),
                now_ms: 1_800_000_000_000,
                next_conn: 0,
                replica,
                keys: Vec::new(),
            }
        }

        /// Runs `work` in one committed transaction, and applies what it shared to the
        /// replica.
        pub fn transaction<T>(
            &mut self,
            work: impl FnOnce(&mut Engine, &mut dyn WriteTx, i64) -> T,
        ) -> T {
            let mut tx = roundtable_engine::replication::RecordingTx::new(
                self.store.transaction().unwrap(),
                true,
            );
            let result = work(&mut self.engine, &mut tx, self.now_ms);
            let ops = std::mem::take(&mut tx.ops);
            Box::new(tx).commit().unwrap();
            for op in &ops {
                if let roundtable_engine::records::WriteOp::AppendEvent { event } = op
                    && let Some(key) = &event.client_key
                {
                    self.keys.push((event.from.clone(), key.clone()));
                }
                self.replica.apply(op, self.now_ms);
            }
            result
        }

        /// The audit log as committed, ascending.
        pub fn audit_log(&self) -> Vec<roundtable_engine::records::AuditRecord> {
            let mut entries = Vec::new();
            let visit = |entry| {
                entries.push(entry);
                true
            };
            match &self.home {
                StoreHome::Dir(dir) => {
                    sqlite::read_audit_log(&dir.path().join("hub.sqlite3"), visit).unwrap()
                }
                StoreHome::Postgres(database) => {
                    postgres::read_audit_log(&database.url, visit).unwrap()
                }
            }
            entries
        }

        /// Runs one command in its own committed transaction.
        pub fn run(&mut self, caller: &Caller, frame: ClientFrame) -> Result<Outcome, Refusal> {
            match self.transaction(|engine, tx, now_ms| {
                engine.execute(tx, now_ms, caller, &Command::Frame(frame))
            }) {
                Ok(outcome) => Ok(outcome),
                Err(ExecError::Refused(refusal)) => Err(refusal),
                Err(ExecError::Store(error)) => panic!("store error: {error}"),
            }
        }

        pub fn signup(&mut self, handle: &str) -> Caller {
            let outcome = self
                .transaction(|engine, tx, now_ms| {
                    engine.signup(
                        tx,
                        now_ms,
                        crate::config::SignupMode::Open,
                        roundtable_protocol::client::SignupRequest {
                            handle: handle.into(),
                            name: handle.to_uppercase(),
                            discoverable: None,
                            invite: None,
                        },
                    )
                })
                .unwrap_or_else(|error| panic!("signup {handle}: {error:?}"));
            self.caller(&outcome.principal.id)
        }

        pub fn caller(&mut self, id: &str) -> Caller {
            self.next_conn += 1;
            let principal = self.engine.state.principal(id).unwrap();
            Caller {
                id: id.to_owned(),
                kind: principal.kind,
                device: "test".into(),
                conn: ConnId(self.next_conn),
                via: Via::Ws,
            }
        }

        /// The writer's housekeeping, which every process runs on its own memory.
        pub fn housekeeping(&mut self) {
            self.engine.forget_old_keys(self.now_ms);
            self.engine.forget_expired(self.now_ms);
            self.replica.sent_keys.prune(self.now_ms);
            self.replica.forget_expired(self.now_ms);
        }

        /// A restart: the engine, and the replica, from what the store holds.
        pub fn restart(&mut self) {
            let snapshot = self.store.load(self.now_ms).unwrap();
            self.engine = Engine::new(snapshot, IdSource::seeded(2));
            self.replica = HubState::from_snapshot(self.store.load(self.now_ms).unwrap());
        }

        /// The replica and the engine remember the same things.
        pub fn assert_replica_matches(&self) {
            assert_eq!(digest(&self.replica), digest(&self.engine.state));
            for (sender, key) in &self.keys {
                let positions = |state: &HubState| -> Vec<(String, u64)> {
                    let mut found: Vec<(String, u64)> = state
                        .sent_keys
                        .find(sender, key)
                        .into_iter()
                        .map(|at| (at.room.to_owned(), at.seq))
                        .collect();
                    found.sort();
                    found
                };
                assert_eq!(positions(&self.replica), positions(&self.engine.state));
            }
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                self.assert_replica_matches();
            }
        }
    }

    /// Everything a state remembers, as sorted lines (its maps have no order).
    fn digest(state: &HubState) -> Vec<String> {
        fn lines<K: std::fmt::Debug, V: std::fmt::Debug>(
            name: &str,
            map: impl IntoIterator<Item = (K, V)>,
        ) -> Vec<String> {
            let mut lines: Vec<String> = map
                .into_iter()
                .map(|(key, value)| format!("{name} {key:?} {value:?}"))
                .collect();
            lines.sort();
            lines
        }
        let sorted_tokens_of = state.tokens_of.iter().map(|(principal, hashes)| {
            let mut hashes: Vec<String> = hashes.iter().map(|h| format!("{h:?}")).collect();
            hashes.sort();
            (principal.clone(), hashes)
        });
        let sorted_controls = state.controls.iter().map(|(agent, controls)| {
            let mut controls: Vec<String> = controls.iter().map(|c| format!("{c:?}")).collect();
            controls.sort();
            (agent.clone(), controls)
        });
        let mut all = vec![format!("ids {} {}", state.hub_id, state.epoch)];
        all.extend(lines("principal", &state.principals));
        all.extend(lines("handle", &state.handles));
        all.extend(lines("token", &state.tokens));
        all.extend(lines("tokens_of", sorted_tokens_of));
        all.extend(lines("agents_of", &state.agents_of));
        all.extend(lines("room", &state.rooms));
        all.extend(lines("rooms_of", &state.rooms_of));
        all.extend(lines("inbox", &state.inbox_heads));
        all.extend(lines("ping", &state.pings));
        all.extend(lines("skeleton", &state.skeletons));
        all.extend(lines("contact", &state.contacts));
        all.extend(lines("contacts_of", &state.contacts_of));
        all.extend(lines("request", &state.requests));
        all.extend(lines("pending", &state.pending));
        all.extend(lines("pending_of", &state.pending_of));
        all.extend(lines("invite", &state.invites));
        all.extend(lines("control", sorted_controls));
        all.push(format!("audit {:?}", state.audit_head));
        all
    }
}
