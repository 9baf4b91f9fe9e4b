//! The local trust boundary, tried from the agent's side: a session on the person's own
//! machine, with the person's Unix user, tries to act as the person or to pass for
//! another agent. Each case asserts the exact refusal and that nothing was written.

use std::collections::BTreeMap;
use std::path::Path;

use roundtable_e2e::{Home, Hub, json};

const FAILURE: i32 = 1;
const REFUSED: i32 = 4;

/// Every file under `dir`, by path, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path.display().to_string(), bytes);
            }
        }
    }
    files
}

/// Runs `roundtable --profile PROFILE ARGS` the way an agent session would: inside `sh`
/// started with `env` (`NAME=VALUE` pairs) and named `shell` (argv[0]), the command line
/// given as `line` with `$RT` for the executable.
#[cfg(unix)]
async fn in_session(
    home: &Home,
    shell: &str,
    env: &[(&str, &str)],
    line: &str,
) -> std::process::Output {
    let command = home.command("dana", &[]);
    let program = command.as_std().get_program().to_owned();
    let mut sh = tokio::process::Command::new(shell);
    for (name, value) in command.as_std().get_envs() {
        match value {
            Some(value) => sh.env(name, value),
            None => sh.env_remove(name),
        };
    }
    for (name, value) in env {
        sh.env(name, value);
    }
    // Not the last command of the script: `sh` stays the parent of `roundtable`.
    sh.args(["-c", &format!("{line}; exit $?")])
        .env("RT", &program)
        .kill_on_drop(true);
    sh.output().await.unwrap()
}

// Sessions here are `sh` processes and a link to `/bin/sh`; on Windows the walk is
// tested by `roundtable_platform::process_tree`.
#[cfg(unix)]
#[tokio::test]
async fn a_session_cannot_act_as_its_person_whatever_it_does_with_its_environment() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    let addr = hub.addr();
    home.ok(
        "dana",
        &[
            "signup",
            "--hub",
            &addr,
            "--handle",
            "dana",
            "--discoverable",
            "public",
        ],
    )
    .await;
    home.signup(&hub, "sam").await;
    let asked = json(
        &home
            .ok("sam", &["--json", "contacts", "request", "dana"])
            .await,
    );
    let request = asked["id"].as_str().unwrap().to_owned();
    let before = snapshot(&home.profiles());
    let accept = format!("\"$RT\" --profile dana contacts accept {request}");

    // Marked in its own environment (onboarding sets it in Claude Code's settings).
    let marked = in_session(
        &home,
        "sh",
        &[("ROUNDTABLE_AGENT_SESSION", "dana/writer")],
        &accept,
    )
    .await;
    // The mark dropped on the way: the shell above still has it.
    let unmarked = in_session(
        &home,
        "sh",
        &[("ROUNDTABLE_AGENT_SESSION", "dana/writer")],
        &format!("env -u ROUNDTABLE_AGENT_SESSION {accept}"),
    )
    .await;
    // A session `roundtable run` started (it marks the agent it runs).
    let run = in_session(&home, "sh", &[("ROUNDTABLE_AGENT", "dana/x")], &accept).await;
    // No mark at all, but an agent CLI above (Codex and Gemini CLI have no setting for it).
    let bin = tempfile::tempdir().unwrap();
    let codex = bin.path().join("codex");
    std::os::unix::fs::symlink("/bin/sh", &codex).unwrap();
    let under_cli = in_session(&home, codex.to_str().unwrap(), &[], &accept).await;
    for (case, output, evidence) in [
        (
            "marked",
            &marked,
            "ROUNDTABLE_AGENT_SESSION=dana/writer is set",
        ),
        (
            "unmarked",
            &unmarked,
            "above it has ROUNDTABLE_AGENT_SESSION=dana/writer",
        ),
        ("run", &run, "ROUNDTABLE_AGENT=dana/x is set"),
        ("under a CLI", &under_cli, "above it is Codex"),
    ] {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(REFUSED), "{case}: {stderr}");
        assert!(
            stderr.contains("refused: this runs inside an agent session")
                && stderr.contains(evidence)
                && stderr.contains("an agent never acts as its person"),
            "{case}: {stderr}"
        );
    }
    // Nothing was written: not a byte of any profile or cache, and the request waits.
    assert_eq!(snapshot(&home.profiles()), before);
    let pending = json(&home.ok("sam", &["--json", "contacts"]).await);
    assert_eq!(pending["requests"][0]["id"], request.as_str());
    // `answer` is refused the same way, before anything is looked up.
    let answer = in_session(
        &home,
        "sh",
        &[("ROUNDTABLE_AGENT_SESSION", "dana/writer")],
        "\"$RT\" --profile dana answer q-anything Allow",
    )
    .await;
    assert_eq!(answer.status.code(), Some(REFUSED));
    // An agent's own profile is its own to use in a session.
    let registered = json(
        &home
            .ok("dana", &["--json", "agents", "register", "writer"])
            .await,
    );
    let agent_profile = registered["profile"].as_str().unwrap().to_owned();
    let own = in_session(
        &home,
        "sh",
        &[("ROUNDTABLE_AGENT_SESSION", "dana/writer")],
        &format!("\"$RT\" --profile {agent_profile} --json rooms"),
    )
    .await;
    assert!(
        own.status.success(),
        "{}",
        String::from_utf8_lossy(&own.stderr)
    );
    // Outside any session the person accepts.
    home.ok("dana", &["contacts", "accept", &request]).await;
}

#[tokio::test]
async fn agent_commands_take_an_agents_own_profile_only() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    home.ok("dana", &["agents", "register", "writer"]).await;
    // A person's profile saved under an agent's name is still the person's.
    let disguised = home.profiles().join("dana.helper");
    std::fs::create_dir(&disguised).unwrap();
    for entry in std::fs::read_dir(home.profiles().join("dana")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, disguised.join(path.file_name().unwrap())).unwrap();
        }
    }
    let before = snapshot(&home.profiles());
    let cases: [(&[&str], &str); 6] = [
        (
            &["mcp", "--agent", "dana"],
            "roundtable mcp: \"dana\" is not an agent",
        ),
        (
            &["mcp", "--agent", "default"],
            "roundtable mcp: \"default\" is not an agent",
        ),
        (
            &["hook", "claude", "--agent", "dana"],
            "roundtable hook: \"dana\" is not an agent",
        ),
        (
            &["run", "--agent", "dana", "--cli", "claude"],
            "roundtable run: \"dana\" is not an agent",
        ),
        (
            &["mcp", "--agent", "dana/helper"],
            "\"dana/helper\" is not an agent: its profile holds \"dana\"'s token",
        ),
        (
            &["hook", "codex", "--agent", "dana/helper"],
            "its profile holds \"dana\"'s token",
        ),
    ];
    for (args, expected) in cases {
        let stderr = home.fails("dana", args, FAILURE).await;
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(stderr.contains("`owner/name`"), "{args:?}: {stderr}");
    }
    assert_eq!(snapshot(&home.profiles()), before);
    // The agent's own profile is taken (a hook with nothing to do exits 0).
    let output = home
        .command("dana", &["hook", "claude", "--agent", "dana/writer"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A `PATH` with the project's fake agent CLIs first.
#[cfg(unix)]
fn fake_clis_path() -> std::ffi::OsString {
    let mut dirs = vec![roundtable_e2e::fixtures().join("agent-clis")];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

// Symbolic links: Windows makes them for administrators and developer mode only.
#[cfg(unix)]
#[tokio::test]
async fn onboarding_never_edits_through_a_link_out_of_a_project() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    let user_home = home.user_home();
    // The person's account file, with what must never leave it.
    let account = user_home.join(".claude.json");
    std::fs::write(
        &account,
        "{\n  \"oauthAccount\": {\"accessToken\": \"sk-secret\"}\n}\n",
    )
    .unwrap();
    // A repository someone else wrote: its `.mcp.json` is a link to the account file.
    let project = user_home.join("work/repo");
    std::fs::create_dir_all(&project).unwrap();
    std::os::unix::fs::symlink("../../.claude.json", project.join(".mcp.json")).unwrap();
    // Another: its `.claude` directory is a link out of it.
    let other = user_home.join("work/other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::create_dir_all(user_home.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink("../../elsewhere", other.join(".claude")).unwrap();
    let before = snapshot(&user_home);
    let onboard = |dir: &std::path::Path| {
        let mut command = home.command(
            "dana",
            &[
                "agents",
                "onboard",
                "claude",
                "--name",
                "writer",
                "--project",
                dir.to_str().unwrap(),
            ],
        );
        command.env("PATH", fake_clis_path());
        command
    };
    for (dir, link) in [
        (&project, project.join(".mcp.json")),
        (&other, other.join(".claude")),
    ] {
        let output = onboard(dir).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains(&format!("{} is a symbolic link", link.display()))
                && stderr.contains("does not edit configurations through links"),
            "{stderr}"
        );
    }
    // Not a byte changed, no file added; the links are still links.
    assert_eq!(snapshot(&user_home), before);
    assert!(
        std::fs::symlink_metadata(project.join(".mcp.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // A project of plain files is onboarded.
    let plain = user_home.join("work/plain");
    std::fs::create_dir_all(&plain).unwrap();
    let output = onboard(&plain).output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        std::fs::read_to_string(plain.join(".mcp.json"))
            .unwrap()
            .contains("dana/writer")
    );
}

#[tokio::test]
async fn a_token_never_crosses_a_network_in_the_clear_unless_the_person_says_so() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    // TEST-NET-1: no machine answers there; the refusal comes before any connection.
    for args in [
        &["signup", "--hub", "192.0.2.1:7300", "--handle", "dana"][..],
        &["login", "--hub", "hub.example.com:7300", "--token", "rt_x"][..],
        &["signup", "--hub", "ws://192.0.2.1:7300", "--handle", "dana"][..],
    ] {
        let stderr = home.fails("dana", args, FAILURE).await;
        assert!(
            stderr.contains("has no TLS: your token would cross the network in the clear")
                && stderr.contains("--insecure"),
            "{args:?}: {stderr}"
        );
    }
    assert!(!home.profiles().join("dana").exists());
    // This machine's hub, by name or address, needs no TLS.
    let port = hub.addr().rsplit_once(':').unwrap().1.to_owned();
    home.ok(
        "dana",
        &[
            "signup",
            "--hub",
            &format!("localhost:{port}"),
            "--handle",
            "dana",
        ],
    )
    .await;
}

#[tokio::test]
async fn a_contacts_agent_is_invited_only_once_it_is_a_contact_itself_as_the_help_says() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    let addr = hub.addr();
    for handle in ["dana", "sam"] {
        home.ok(
            handle,
            &[
                "signup",
                "--hub",
                &addr,
                "--handle",
                handle,
                "--discoverable",
                "public",
            ],
        )
        .await;
    }
    let asked = json(
        &home
            .ok("dana", &["--json", "contacts", "request", "sam"])
            .await,
    );
    home.ok(
        "sam",
        &["contacts", "accept", asked["id"].as_str().unwrap()],
    )
    .await;
    home.ok(
        "sam",
        &["agents", "register", "bot", "--discoverable", "public"],
    )
    .await;
    home.ok("dana", &["room", "create", "--title", "Design"])
        .await;
    let help = home.ok("dana", &["room", "invite", "--help"]).await;
    assert!(
        help.contains("a contact's agent joins only once it is your contact too"),
        "{help}"
    );
    // The contact joins; the contact's agent does not, until it is a contact itself.
    home.ok("dana", &["room", "invite", "Design", "sam"]).await;
    let stderr = home
        .fails("dana", &["room", "invite", "Design", "sam/bot"], REFUSED)
        .await;
    assert!(stderr.contains("not your kin nor a contact"), "{stderr}");
    let asked = json(
        &home
            .ok("dana", &["--json", "contacts", "request", "sam/bot"])
            .await,
    );
    home.ok(
        "sam",
        &["contacts", "accept", asked["id"].as_str().unwrap()],
    )
    .await;
    home.ok("dana", &["room", "invite", "Design", "sam/bot"])
        .await;
}

/// Answers at `addr` as a hub would, with a history of its own: reads the `auth` it is
/// sent, refuses it, and closes. Returns the frames it was sent.
async fn squat(addr: std::net::SocketAddr) -> tokio::task::JoinHandle<Vec<String>> {
    use futures_util::{SinkExt, StreamExt};
    use roundtable_protocol::server::{Hello, ServerFrame};
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut socket = tokio_tungstenite::accept_async(stream).await.unwrap();
        let hello = ServerFrame::Hello(Hello {
            proto: 1,
            hub: "h_stranger".into(),
            epoch: "ep_stranger".into(),
            hb_ms: 30_000,
            max_frame: 1 << 20,
            max_queue: 1000,
            replay_max: None,
            max_queue_bytes: None,
        });
        socket
            .send(tokio_tungstenite::tungstenite::Message::Text(
                hello.to_json().into(),
            ))
            .await
            .unwrap();
        let mut received = Vec::new();
        if let Some(Ok(tokio_tungstenite::tungstenite::Message::Text(frame))) = socket.next().await
        {
            received.push(frame.to_string());
            let id = serde_json::from_str::<serde_json::Value>(&frame).unwrap()["id"].clone();
            let refusal =
                serde_json::json!({"t": "err", "re": id, "code": "unauthorized", "msg": "no"});
            let _ = socket
                .send(tokio_tungstenite::tungstenite::Message::Text(
                    refusal.to_string().into(),
                ))
                .await;
        }
        let _ = socket.close(None).await;
        received
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_at_the_hubs_address_empties_no_cache() {
    let mut hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    home.ok("dana", &["room", "create", "--title", "plans"])
        .await;
    home.ok("dana", &["send", "plans", "the plan"]).await;
    let (core, sync) = roundtable_e2e::synced_core(home.profile("dana")).await;
    let epoch = core.read_blocking(|cache| cache.meta("epoch")).unwrap();
    let before = roundtable_e2e::cache_view(&core);
    sync.stop().await;
    // Another process takes the hub's port while the hub is down.
    let addr: std::net::SocketAddr = hub.addr().parse().unwrap();
    hub.stop().await;
    let stranger = squat(addr).await;
    let sync = core.start();
    let received = stranger.await.unwrap();
    sync.stop().await;
    // It was asked to authenticate (the token went to it: reaching the hub over TCP cannot
    // tell it from the hub), and refused; the cache is as it was.
    assert!(received[0].contains("\"auth\""), "{received:?}");
    assert_eq!(
        core.read_blocking(|cache| cache.meta("epoch")).unwrap(),
        epoch
    );
    assert_eq!(roundtable_e2e::cache_view(&core), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apps_hub_is_reached_on_its_socket_and_a_taken_port_gets_no_token() {
    use roundtable_core::profile::{Profile, Secret};
    let dir = tempfile::tempdir().unwrap();
    let config = roundtable_hub::HubConfig::new(dir.path().join("hub"));
    let created = roundtable_hub::admin::add_user(&config, "dana", "Dana").unwrap();
    let hub = roundtable_hub::embedded::start(
        config,
        Some(roundtable_hub::embedded::bind("127.0.0.1:0".parse().unwrap()).unwrap()),
    )
    .unwrap();
    let socket = hub.socket.clone().unwrap();
    let home = Home::default();
    Profile::save(
        &home.profiles(),
        "dana",
        &format!("unix:{}", socket.display()),
        &created.principal.id,
        &created.principal.handle,
        &Secret::new(created.token.clone()),
        None,
    )
    .unwrap();
    // The person's CLI works over the socket.
    home.ok("dana", &["room", "create", "--title", "plans"])
        .await;
    home.ok("dana", &["send", "plans", "over the socket"]).await;
    let rooms = json(&home.ok("dana", &["--json", "rooms"]).await);
    assert_eq!(rooms[0]["title"], "plans", "{rooms}");
    // The hub is down and another process holds its port: the CLI does not go there.
    let port = hub.tcp.unwrap();
    tokio::task::spawn_blocking(move || hub.stop())
        .await
        .unwrap()
        .unwrap();
    let squatter = tokio::net::TcpListener::bind(port).await.unwrap();
    let output = home.run("dana", &["sync"]).await;
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let knocked = tokio::time::timeout(std::time::Duration::ZERO, squatter.accept()).await;
    assert!(knocked.is_err(), "a client knocked at the port");
}

/// A Secret Service of its own (gnome-keyring on a private session bus), as a desktop
/// session has; both stop when it is dropped.
struct SecretService {
    bus: std::process::Child,
    address: String,
    _home: tempfile::TempDir,
}

impl SecretService {
    fn start() -> SecretService {
        use std::io::{BufRead, Write};
        use std::process::{Command, Stdio};
        let home = tempfile::tempdir().unwrap();
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon (scripts/test.sh installs it)");
        let mut address = String::new();
        std::io::BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        let address = address.trim().to_owned();
        // Unlocked with a password on its standard input; it stays, on the bus, once its
        // first process returns.
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--unlock", "--components=secrets"])
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env("HOME", home.path())
            .env("XDG_RUNTIME_DIR", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon (scripts/test.sh installs it)");
        keyring
            .stdin
            .take()
            .unwrap()
            .write_all(b"a password")
            .unwrap();
        assert!(keyring.wait().unwrap().success());
        SecretService {
            bus,
            address,
            _home: home,
        }
    }

    /// Every secret Roundtable keeps there.
    fn roundtable_secrets(&self) -> String {
        let output = std::process::Command::new("secret-tool")
            .args(["search", "--all", "--unlock", "service", "roundtable"])
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .output()
            .expect("secret-tool (scripts/test.sh installs it)");
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr)
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

#[tokio::test]
async fn the_persons_token_is_kept_in_the_secret_store_where_one_answers() {
    let store = SecretService::start();
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    let with_store = |args: &[&str]| {
        let mut command = home.command("dana", args);
        command
            .env("DBUS_SESSION_BUS_ADDRESS", &store.address)
            .env_remove("ROUNDTABLE_TOKEN_STORE");
        command
    };
    let output = with_store(&["signup", "--hub", &hub.addr(), "--handle", "dana"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("token in the OS secret store"),
        "{output:?}"
    );
    // No file holds it; the store does.
    let dir = home.profiles().join("dana");
    assert!(!dir.join("token").exists());
    let secrets = store.roundtable_secrets();
    let token = secrets
        .lines()
        .find_map(|line| line.strip_prefix("secret = "))
        .unwrap_or_else(|| panic!("no secret in the store: {secrets}"))
        .to_owned();
    assert!(token.starts_with("rt_"), "{secrets}");
    for (path, bytes) in snapshot(&home.profiles()) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&token),
            "{path} holds the token"
        );
    }
    // The person's commands take it from there.
    let output = with_store(&["room", "create", "--title", "kept"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    // With no store answering, the profile says where its token is and what to do.
    let output = home
        .command("dana", &["rooms"])
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("ROUNDTABLE_TOKEN_STORE")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(FAILURE), "{stderr}");
    assert!(
        stderr.contains("its token is in the OS secret store")
            && stderr.contains("ROUNDTABLE_TOKEN_STORE=file"),
        "{stderr}"
    );
    // An agent's token stays in its own profile's file, for its bridge and hooks.
    let registered = with_store(&["--json", "agents", "register", "writer"])
        .output()
        .await
        .unwrap();
    assert!(registered.status.success(), "{registered:?}");
    assert!(home.profiles().join("dana.writer/token").exists());
}

#[tokio::test]
async fn a_hub_reached_over_the_network_is_its_pinned_certificate_or_gets_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ours = roundtable_testkit::pki::self_signed(dir.path(), "hub");
    let other = roundtable_testkit::pki::self_signed(dir.path(), "impostor");
    let pin = roundtable_core::hub_address::pin_of(&ours.der);
    let start = |certificate: &roundtable_testkit::pki::HubCertificate| {
        let args = [
            "--tls-cert".to_owned(),
            certificate.cert.display().to_string(),
            "--tls-key".to_owned(),
            certificate.key.display().to_string(),
        ];
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            Hub::start(&args).await
        }
    };
    let hub = start(&ours).await;
    let impostor = start(&other).await;
    let port = |hub: &Hub| hub.addr().rsplit_once(':').unwrap().1.to_owned();
    let home = Home::default();
    // Its certificate signs itself: without the pin, no client trusts it.
    let plain = format!("wss://localhost:{}", port(&hub));
    let stderr = home
        .fails("dana", &["signup", "--hub", &plain, "--handle", "dana"], 3)
        .await;
    assert!(stderr.contains("TLS"), "{stderr}");
    // Pinned, it is the hub.
    let pinned = format!("wss://localhost:{}#{pin}", port(&hub));
    home.ok("dana", &["signup", "--hub", &pinned, "--handle", "dana"])
        .await;
    home.ok("dana", &["room", "create", "--title", "pinned"])
        .await;
    // Another hub with another certificate, where the pinned one was expected, gets no
    // token: the handshake fails before one could be sent.
    let token = home.profile("dana").token.expose().to_owned();
    let elsewhere = format!("wss://localhost:{}#{pin}", port(&impostor));
    let mut login = home.command("sam", &["login", "--hub", &elsewhere, "--token", "-"]);
    let mut child = login
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use tokio::io::AsyncWriteExt as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{token}\n").as_bytes())
        .await
        .unwrap();
    let output = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("not the one pinned"), "{stderr}");
    assert!(!home.profiles().join("sam").exists());
}
