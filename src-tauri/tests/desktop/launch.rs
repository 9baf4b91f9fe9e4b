//! Launching the app: one window per person. A second launch (a link clicked, the launcher
//! clicked again) hands its arguments to the app that runs and exits; a launch racing an app
//! that quits, which leaves without taking them, starts as the app itself.

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::harness::{Desk, PATIENCE};
use crate::support::{self, Machine};

/// The name the running app holds on the session bus (its identifier, as the
/// single-instance plugin names it), and the object that takes a second launch's arguments.
const INSTANCE_NAME: &str = "dev.roundtable.desktop.SingleInstance";

/// Holds the app's name on the bus at `address` as an app that quits does when a launch
/// reaches it: it leaves the bus without answering. Says so on the channel returned.
fn a_quitting_app(address: &str) -> mpsc::Receiver<()> {
    let connection = zbus::blocking::connection::Builder::address(address)
        .unwrap()
        .name(INSTANCE_NAME)
        .unwrap()
        .build()
        .unwrap();
    let (asked, reached) = mpsc::channel();
    std::thread::spawn(move || {
        for message in zbus::blocking::MessageIterator::from(&connection) {
            let Ok(message) = message else { break };
            if message
                .header()
                .member()
                .is_some_and(|member| member.as_str() == "ExecuteCallback")
            {
                // Dropped unanswered: the connection closes, and the name is free.
                let _ = asked.send(());
                return;
            }
        }
    });
    reached
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_racing_an_app_that_quits_starts_and_a_second_one_goes_to_the_running_app() {
    let mut quitting = None;
    let desk = Desk::launch_on_bus(
        "launch-race",
        Machine::new(),
        support::app_bin(),
        |address| quitting = Some(a_quitting_app(address)),
    )
    .await;
    // The app found the name taken, handed its arguments over, got no answer, and started
    // again as the app: in the first WebDriver session, whose launch it was.
    assert!(
        quitting.unwrap().recv_timeout(PATIENCE).is_ok(),
        "the launch never reached the quitting app"
    );
    assert_eq!(
        desk.session_tries(),
        1,
        "the app did not start on its first launch"
    );
    let log = std::fs::read_to_string(desk.shots_dir().join("app.log")).unwrap();
    assert!(log.contains("starting again"), "{log}");

    // A second launch, now that the app runs, hands it its arguments and exits at once.
    let started = Instant::now();
    let mut second = Command::new(support::app_bin())
        .envs(desk.env())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the second launch kept running"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    // The first is still the app, and still answers.
    desk.wait("nav-rooms").await;
    desk.finish().await;
}
