//! The desktop app, for real, under test: its binary launched by tauri-driver through
//! WebKitWebDriver in an X server (the one in `DISPLAY`, else an Xvfb of its own), with a
//! private D-Bus session whose `org.freedesktop.Notifications` is the test's, a temporary
//! `HOME` with the project's fake agent CLIs on `PATH`, and its own Roundtable data.
//! Everything it starts is stopped when it is dropped, even after a failed assertion.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, Locator};
use serde_json::Value;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::OwnedValue;

use crate::support::{self, Bus, Display, Driver, Machine};

/// How long the tests wait for the app.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A desktop notification the app sent.
#[derive(Debug, Clone)]
pub struct Notified {
    #[allow(dead_code, reason = "no test needs it yet; failure messages show it")]
    pub id: u32,
    pub app_name: String,
    pub summary: String,
    pub body: String,
    pub actions: Vec<String>,
}

struct Notifications {
    next_id: u32,
    sent: mpsc::Sender<Notified>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Notifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &mut self,
        app_name: String,
        replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        actions: Vec<String>,
        _hints: HashMap<String, OwnedValue>,
        _expire_timeout: i32,
    ) -> u32 {
        let id = if replaces_id != 0 {
            replaces_id
        } else {
            self.next_id += 1;
            self.next_id
        };
        let _ = self.sent.send(Notified {
            id,
            app_name,
            summary,
            body,
            actions,
        });
        id
    }

    fn get_capabilities(&self) -> Vec<String> {
        vec!["actions".into(), "body".into(), "persistence".into()]
    }

    #[zbus(out_args("name", "vendor", "version", "spec_version"))]
    fn get_server_information(&self) -> (String, String, String, String) {
        (
            "tests".into(),
            "roundtable".into(),
            "1".into(),
            "1.2".into(),
        )
    }

    async fn close_notification(
        &self,
        id: u32,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> zbus::fdo::Result<()> {
        Self::notification_closed(&emitter, id, 3).await?;
        Ok(())
    }

    #[zbus(signal)]
    async fn notification_closed(
        emitter: &SignalEmitter<'_>,
        id: u32,
        reason: u32,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn action_invoked(
        emitter: &SignalEmitter<'_>,
        id: u32,
        action_key: &str,
    ) -> zbus::Result<()>;
}

/// The workspace's root.
pub fn workspace() -> PathBuf {
    support::workspace()
}

/// The `roundtable` CLI of this build (beside this test's binary directory).
pub fn roundtable_bin() -> PathBuf {
    roundtable_testkit::roundtable_bin()
}

/// One desktop app, driven.
pub struct Desk {
    /// The app's binary.
    app: PathBuf,
    pub client: Client,
    pub machine: Machine,
    notified: mpsc::Receiver<Notified>,
    _bus_server: zbus::blocking::Connection,
    env: Vec<(String, String)>,
    shots: PathBuf,
    // Dropped last, in this order: the app, the bus, the display.
    _driver: Driver,
    _bus: Bus,
    _display: Display,
}

/// `roundtable ARGS` as `machine`'s person, before its app runs; its stdout.
pub fn machine_cli(machine: &Machine, args: &[&str]) -> String {
    let output = Command::new(roundtable_bin())
        .args(args)
        .envs(machine.env("", ""))
        .env_remove("DISPLAY")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "roundtable {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

impl Desk {
    /// Starts the app on a fresh machine; `prepare` writes into its `HOME` first.
    pub async fn start(name: &str, prepare: impl FnOnce(&Path)) -> Desk {
        let machine = Machine::new();
        prepare(&machine.home());
        Desk::start_on(name, machine).await
    }

    /// Starts the app on `machine`, as it was prepared.
    pub async fn start_on(name: &str, machine: Machine) -> Desk {
        Desk::launch(name, machine, support::app_bin()).await
    }

    /// Starts the app at `app` (this build's, or one a package installed) on `machine`.
    pub async fn launch(name: &str, machine: Machine, app: PathBuf) -> Desk {
        Desk::launch_on_bus(name, machine, app, |_| {}).await
    }

    /// As [`Desk::launch`], with `on_bus` given the address of the machine's session bus
    /// before the app starts (to put something of the test's on it first).
    pub async fn launch_on_bus(
        name: &str,
        machine: Machine,
        app: PathBuf,
        on_bus: impl FnOnce(&str),
    ) -> Desk {
        let display = Display::start();
        // A private session bus, with our notification server on it.
        let bus = Bus::start(&machine.runtime());
        on_bus(&bus.address);
        let (sent, notified) = mpsc::channel();
        let bus_server = zbus::blocking::connection::Builder::address(bus.address.as_str())
            .unwrap()
            .name("org.freedesktop.Notifications")
            .unwrap()
            .serve_at(
                "/org/freedesktop/Notifications",
                Notifications { next_id: 0, sent },
            )
            .unwrap()
            .build()
            .unwrap();

        // The person's own programs first, as a desktop session has them: a test may put a
        // browser opener (`xdg-open`) there.
        let mut path = vec![
            machine.home().join(".local/bin"),
            workspace().join("tests/fixtures/agent-clis"),
            roundtable_bin().parent().unwrap().to_path_buf(),
        ];
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(path).unwrap();
        let mut env = machine.env(&display.name, &bus.address);
        env.push(("PATH".into(), path.to_string_lossy().into_owned()));
        env.push((
            "FAKE_AGENT_LOG".into(),
            machine
                .dir
                .path()
                .join("fake-agents.jsonl")
                .display()
                .to_string(),
        ));
        let shots = workspace().join("target/test-screenshots").join(name);
        // A failure's screenshot from an earlier run must not pass for this run's.
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        // What the app and the drivers say, for when a test fails.
        let log = std::fs::File::create(shots.join("app.log")).unwrap();
        let (driver, client) = Driver::launch(&env, &log, &app, PATIENCE)
            .await
            .expect("a WebDriver session with the app");
        let desk = Desk {
            app,
            client,
            machine,
            notified,
            _bus_server: bus_server,
            env,
            shots,
            _driver: driver,
            _bus: bus,
            _display: display,
        };
        desk.wait("nav-rooms").await;
        desk.wait_started().await;
        desk
    }

    /// Waits until the app's session is open (on a first run: its hub started and the
    /// person created on it), so the person's CLI commands find their profile: the window
    /// shows its navigation, and "Loading…", before that.
    async fn wait_started(&self) {
        self.wait_css("main.content > :not(p.loading)").await;
    }

    /// Ends the WebDriver session (the app quits).
    pub async fn finish(self) {
        self.quit().await;
    }

    /// Ends the WebDriver session, which quits the app (bounded: a driver that never
    /// answers leaves the app to the drop of its process tree).
    async fn quit(&self) {
        let _ = tokio::time::timeout(PATIENCE, self.client.clone().close()).await;
    }

    /// Where this test's screenshots and the app's log (`app.log`) go.
    pub fn shots_dir(&self) -> &Path {
        &self.shots
    }

    /// The tries the app's last WebDriver session took (1 when the first did).
    pub fn session_tries(&self) -> u32 {
        self._driver.tries
    }

    /// Quits the app; `away` runs while it is closed; then starts it again on the same
    /// machine (a new WebDriver session).
    pub async fn reopen(&mut self, away: impl AsyncFnOnce()) {
        self.quit().await;
        let app = self.app.clone();
        let started = Instant::now();
        while self._driver.launched(&app).is_some() {
            assert!(started.elapsed() < PATIENCE, "the app did not quit");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        away().await;
        let log = std::fs::File::options()
            .append(true)
            .open(self.shots.join("app.log"))
            .unwrap();
        let (driver, client) = Driver::launch(&self.env, &log, &app, PATIENCE)
            .await
            .expect("a new WebDriver session with the app");
        self._driver = driver;
        self.client = client;
        self.wait("nav-rooms").await;
        self.wait_started().await;
    }

    /// The environment the app runs in (for CLI commands as this machine's person).
    pub fn env(&self) -> impl Iterator<Item = (&str, &str)> {
        self.env.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn home(&self) -> PathBuf {
        self.machine.home()
    }

    /// Where this machine's clients reach the app's own hub (its socket).
    pub fn hub_address(&self) -> String {
        self.machine.hub_address().expect("the app's hub address")
    }

    /// The TCP ports the app listens on, but for the inspector server WebKitWebDriver has
    /// it open to drive it (named in its environment).
    pub fn app_ports(&self) -> Vec<u16> {
        let pid = self
            ._driver
            .launched(&support::app_bin())
            .expect("the app runs");
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let inspector: Option<u16> = environ
            .split(|byte| *byte == 0)
            .filter_map(|entry| std::str::from_utf8(entry).ok())
            .find_map(|entry| entry.strip_prefix("WEBKIT_INSPECTOR_SERVER="))
            .and_then(|address| address.rsplit_once(':')?.1.parse().ok());
        support::Driver::listening_ports(pid)
            .into_iter()
            .filter(|port| Some(*port) != inspector)
            .collect()
    }

    /// Lets teammates on the network in from Settings; the address it shows them.
    pub async fn let_teammates_in(&self) -> String {
        self.go("settings").await;
        self.click("share-network").await;
        self.wait_for_element_text(
            &Desk::css("network-address"),
            "the hub shows where teammates reach it",
            |text| text.starts_with("wss://"),
        )
        .await
    }

    /// `roundtable ARGS` in this machine's environment; its stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new(roundtable_bin())
            .args(args)
            .envs(self.env())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "roundtable {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    fn css(testid: &str) -> String {
        format!("[data-testid='{testid}']")
    }

    /// Waits for the element with this test id.
    pub async fn wait(&self, testid: &str) -> Element {
        self.wait_css(&Desk::css(testid)).await
    }

    pub async fn wait_css(&self, css: &str) -> Element {
        eprintln!("[harness] waiting for {css}");
        // `at_most` bounds the polling, not one request: a request the webview never
        // answers would otherwise hold the test until nextest ends it.
        let waited = tokio::time::timeout(
            PATIENCE + Duration::from_secs(5),
            self.client
                .wait()
                .at_most(PATIENCE)
                .for_element(Locator::Css(css)),
        )
        .await
        .unwrap_or_else(|_| panic!("a WebDriver request waiting for {css} never returned"));
        match waited {
            Ok(element) => element,
            Err(error) => {
                self.screenshot("failure").await;
                let text = self.window_text().await;
                panic!("no {css} in the window ({error}); it shows:\n{text}");
            }
        }
    }

    pub async fn click(&self, testid: &str) {
        let element = self.wait(testid).await;
        tokio::time::timeout(PATIENCE, element.click())
            .await
            .unwrap_or_else(|_| panic!("clicking {testid} did not return"))
            .unwrap();
    }

    /// Clicks the element `css` selects.
    pub async fn click_css(&self, css: &str) {
        let element = self.wait_css(css).await;
        tokio::time::timeout(PATIENCE, element.click())
            .await
            .unwrap_or_else(|_| panic!("clicking {css} did not return"))
            .unwrap();
    }

    pub async fn type_into(&self, testid: &str, text: &str) {
        let field = self.wait(testid).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    pub async fn text(&self, testid: &str) -> String {
        self.wait(testid).await.text().await.unwrap()
    }

    /// Waits until `check` holds of the window's text (polled).
    pub async fn wait_for_text(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        eprintln!("[harness] waiting until {what}");
        let started = Instant::now();
        loop {
            let text = self.window_text().await;
            if check(&text) {
                return text;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{what}; the window shows:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `check` holds of the text of the element `css` selects (polled: an
    /// element may be in the page before its text is shown).
    pub async fn wait_for_element_text(
        &self,
        css: &str,
        what: &str,
        check: impl Fn(&str) -> bool,
    ) -> String {
        eprintln!("[harness] waiting until {what}");
        let started = Instant::now();
        loop {
            let text = self.wait_css(css).await.text().await.unwrap_or_default();
            if check(&text) {
                return text;
            }
            assert!(started.elapsed() < PATIENCE, "{what}; {css} shows:\n{text}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Everything the window shows, as text.
    pub async fn window_text(&self) -> String {
        let body = tokio::time::timeout(PATIENCE, self.client.find(Locator::Css("body")))
            .await
            .expect("the window's text in time")
            .unwrap();
        tokio::time::timeout(PATIENCE, body.text())
            .await
            .expect("the window's text in time")
            .unwrap_or_default()
    }

    /// Goes to a view through the navigation.
    pub async fn go(&self, view: &str) {
        self.click(&format!("nav-{view}")).await;
        self.wait(&format!("view-{view}")).await;
    }

    /// Saves a screenshot of the window as `NAME.png` under `target/test-screenshots`.
    pub async fn screenshot(&self, name: &str) {
        let png = tokio::time::timeout(PATIENCE, self.client.screenshot())
            .await
            .expect("the screenshot in time")
            .unwrap();
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    /// The next notification, within the patience.
    pub fn notification(&self) -> Notified {
        self.notified
            .recv_timeout(PATIENCE)
            .expect("a desktop notification")
    }

    /// Runs a script in the window; its result.
    pub async fn script(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap()
    }
}

/// Reads a child's whole stdout, failing with its stderr when it fails.
pub fn finished(mut child: Child) -> String {
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {out}{err}");
    out
}
