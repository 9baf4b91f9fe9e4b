//! The UI's contract with the core, on the real app: the scenarios of
//! `ui/src/backend/contract/scenarios.json`, run by the same runner the fake backend's test
//! runs (`ui/src/backend/contract/runner.ts`), here bundled on the fly and loaded into the
//! app's webview, where each call goes through Tauri's IPC to the app's own command. What
//! other people do between the calls (Bob signing up with Dana's invite, an agent being
//! registered) is done here with the `roundtable` CLI, as those people would.

use std::process::Command;
use std::time::Duration;

use fantoccini::wd::TimeoutConfiguration;
use serde_json::{Value, json};

use crate::harness::{Desk, workspace};

/// The runner and the scenarios as one script for the webview (rolldown, from the UI's own
/// packages, which the test command installs before the app is built).
fn contract_bundle() -> String {
    let ui = workspace().join("ui");
    let out = workspace().join("target/contract/webview.js");
    let status = Command::new(ui.join("node_modules/.bin/rolldown"))
        .current_dir(&ui)
        .args([
            "src/backend/contract/webview.ts",
            "--format",
            "iife",
            "--platform",
            "browser",
            "--file",
        ])
        .arg(&out)
        .status()
        .expect(
            "rolldown from ui/node_modules: run the test command once to install the UI's packages",
        );
    assert!(status.success(), "bundling the contract runner failed");
    std::fs::read_to_string(out).unwrap()
}

fn scenarios() -> Vec<Value> {
    let text = std::fs::read_to_string(workspace().join("ui/src/backend/contract/scenarios.json"))
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Plays an act of the scenarios the way the people in it would.
fn act(desk: &Desk, name: &str) {
    match name {
        "bob joins with an invite from dana and registers his agent bob/bot" => {
            let invite: Value =
                serde_json::from_str(&desk.cli(&["--json", "invite", "create"])).unwrap();
            let link = invite["link"].as_str().unwrap().to_owned();
            let hub = desk.hub_address();
            desk.cli(&[
                "--profile",
                "bob",
                "signup",
                "--hub",
                &hub,
                "--handle",
                "bob",
                "--name",
                "Bob",
                "--invite",
                &link,
            ]);
            desk.cli(&["--profile", "bob", "agents", "register", "bot"]);
        }
        "dana registers an agent named helper" => {
            desk.cli(&["agents", "register", "helper"]);
        }
        other => panic!("no way to play the act {other:?} on the real app: add it to contract.rs"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fakes_contract_holds_on_the_real_app() {
    let bundle = contract_bundle();
    let steps = scenarios();
    let desk = Desk::start("contract", |_| {}).await;
    desk.client
        .update_timeouts(TimeoutConfiguration::new(
            Some(Duration::from_secs(180)),
            None,
            None,
        ))
        .await
        .unwrap();
    desk.script(&bundle, vec![]).await;
    let mut bindings = json!({});
    let mut from = 0;
    loop {
        let progress = desk
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 window.roundtableContract.run(arguments[0], arguments[1])
                   .then(done, (error) => done({ failure: 'the runner threw: ' + String(error), actAt: null }));",
                vec![json!(from), bindings.clone()],
            )
            .await
            .unwrap();
        if let Some(failure) = progress["failure"].as_str() {
            desk.screenshot("contract-failed").await;
            panic!("the real app breaks the UI's contract: {failure}");
        }
        bindings = progress["bindings"].clone();
        let Some(at) = progress["actAt"].as_u64() else {
            break;
        };
        let at = at as usize;
        act(&desk, steps[at]["act"].as_str().unwrap());
        from = at + 1;
    }
    // Every value the scenarios bind was bound: the run went through to the end.
    let mut bound: Vec<&str> = bindings
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    bound.sort_unstable();
    assert_eq!(
        bound,
        [
            "bob",
            "botRequest",
            "code",
            "first",
            "helper",
            "invite",
            "plans",
            "roomInvite",
            "withBob"
        ]
    );
    desk.finish().await;
}
