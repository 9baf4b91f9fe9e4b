//! An agent's MCP tools, driven by the official Python MCP client over both protocol
//! generations, the two ways an agent reaches them: `roundtable mcp` over stdio as an agent
//! CLI runs it, and the hub's own `/mcp` over HTTP with nothing but the agent's token (as
//! Claude Code is configured with a header). Tools listed with schemas, messages sent and
//! waited for, questions answered by the person over the hub or through the client's own
//! prompt (the ping withdrawn then), and the boards kept, as the person's own cache then
//! shows.

use roundtable_core::work::events::TaskStatus;
use roundtable_protocol::bodies::ComponentStatus;
use std::time::Duration;

use roundtable_core::Core;
use roundtable_core::cache::TaskFilter;
use roundtable_core::client::PATIENCE;
use roundtable_e2e::{Home, Hub, fixtures, json, settle, test_python};
use roundtable_testkit::roundtable_bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_bridge_serves_an_agent_over_both_protocol_generations() {
    agent_journey(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hubs_mcp_endpoint_serves_an_agent_with_only_its_token_over_both_generations() {
    agent_journey(true).await;
}

async fn agent_journey(over_http: bool) {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    let agent = json(
        &home
            .ok("dana", &["--json", "agents", "register", "writer"])
            .await,
    );
    let token = agent["token"].as_str().unwrap().to_owned();
    home.ok(
        "dana",
        &[
            "room",
            "create",
            "--title",
            "work",
            "--member",
            "dana/writer",
        ],
    )
    .await;

    let script = fixtures().join("mcp_client.py");
    let mut client = tokio::process::Command::new(test_python());
    client
        .arg(&script)
        .arg(roundtable_bin())
        .args(["dana/writer", "dana", "work"])
        .env("ROUNDTABLE_HOME", home.dir.path())
        .env("ROUNDTABLE_LOG", "warn")
        .kill_on_drop(true);
    if over_http {
        client
            .env("MCP_URL", format!("http://{}/mcp", hub.listen))
            .env("MCP_TOKEN", &token);
    }
    let output = tokio::time::timeout(Duration::from_secs(240), client.output())
        .await
        .expect("the MCP client finished in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the MCP client failed:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["legacy: ok", "modern: ok"]
    );

    // What the agent did shows in its person's cache.
    let dana = Core::open(home.profile("dana")).await.unwrap();
    let sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    settle(&dana).await;
    let work = dana.room_id("work").await.unwrap();
    let components = dana
        .read({
            let work = work.clone();
            move |cache| cache.components(&work)
        })
        .await
        .unwrap();
    let parser = components.iter().find(|c| c.id == "parser").unwrap();
    assert_eq!(parser.status, Some(ComponentStatus::Working));
    assert_eq!(parser.working.len(), 1);
    assert_eq!(
        components
            .iter()
            .find(|c| c.id == "cli")
            .unwrap()
            .depends_on,
        ["parser"]
    );
    let tasks = dana
        .read(|cache| cache.task_sessions(&TaskFilter::default()))
        .await
        .unwrap();
    assert_eq!(tasks[0].agent_handle.as_deref(), Some("dana/writer"));
    assert_eq!(tasks[0].tasks[1].status, TaskStatus::InProgress);
    let statuses = dana.read(|cache| cache.agent_statuses()).await.unwrap();
    assert_eq!(statuses[0].detail.as_deref(), Some("parsing (modern)"));
    // Two questions answered by the person, two answered at the client and withdrawn.
    let pings = dana.pings().await.unwrap();
    let answered: Vec<_> = pings.iter().filter(|p| p.answered_by.is_some()).collect();
    assert_eq!(answered.len(), 2, "{pings:?}");
    assert!(answered.iter().all(|p| p.choice.as_deref() == Some("yes")));
    assert!(dana.open_pings().await.unwrap().is_empty(), "{pings:?}");
    sync.stop().await;
}
