//! Two users and an agent work together; every cache ends equal to what the hub holds for
//! its principal, gaps included.

use roundtable_e2e::{Home, Hub, cache_view, check_consistent, flood, hub_view, json, synced_core};
use roundtable_testkit::Client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_and_an_agent_converge_on_what_each_may_see() {
    let hub = Hub::start(&["--no-rate-limit"]).await;
    let home = Home::default();
    let addr = hub.addr();
    home.ok("dana", &["signup", "--hub", &addr, "--handle", "dana"])
        .await;
    home.ok("sam", &["signup", "--hub", &addr, "--handle", "sam"])
        .await;
    // Sam joins through an invite to dana's room: contacts and a member at once.
    let room = json(
        &home
            .ok("dana", &["--json", "room", "create", "--title", "parser"])
            .await,
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let invite = json(
        &home
            .ok("dana", &["--json", "invite", "create", "--room", "parser"])
            .await,
    );
    home.ok(
        "sam",
        &["invite", "redeem", invite["link"].as_str().unwrap()],
    )
    .await;
    let agent = json(
        &home
            .ok("dana", &["--json", "agents", "register", "writer"])
            .await,
    );
    let agent_token = agent["token"].as_str().unwrap().to_owned();
    home.ok("dana", &["room", "invite", "parser", "dana/writer"])
        .await;
    home.login("writer", &addr, &agent_token).await;

    // Enough traffic that a fresh sync is gapped (replay_max is 500) and filled by history.
    let dana_token = home.profile("dana").token.expose().to_owned();
    let mut dana = Client::connect(&hub.ws_url()).await.unwrap();
    dana.auth(&dana_token, "flood").await.unwrap();
    flood(&mut dana, &room, "bulk", 1200, 40).await;
    home.ok("sam", &["send", "parser", "@dana/writer please review"])
        .await;
    home.ok("writer", &["send", "parser", "on it @sam"]).await;
    home.ok("dana", &["send", "parser", "thanks both"]).await;

    for name in ["dana", "sam", "writer"] {
        let profile = home.profile(name);
        let token = profile.token.expose().to_owned();
        let (core, sync) = synced_core(profile).await;
        let expected = hub_view(&hub.ws_url(), &token).await.unwrap();
        let cached = cache_view(&core);
        assert_eq!(
            cached.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "{name}: streams"
        );
        for (stream, events) in &expected {
            assert_eq!(&cached[stream], events, "{name}: stream {stream}");
        }
        if name != "writer" {
            check_consistent(&core).unwrap();
        }
        sync.stop().await;
    }
    // A fresh device of dana's asks for old history: it waits for the gap to be filled
    // rather than printing a partial page.
    home.login("dana-laptop", &addr, &dana_token).await;
    let page: Vec<serde_json::Value> = home
        .ok(
            "dana-laptop",
            &[
                "--json", "history", "parser", "--before", "60", "--limit", "3",
            ],
        )
        .await
        .lines()
        .map(json)
        .collect();
    let seqs: Vec<u64> = page.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs.len(), 3, "{page:?}");
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]) && seqs[2] < 60,
        "{seqs:?}"
    );
    assert!(
        page.iter()
            .all(|m| m["text"].as_str().unwrap().starts_with("bulk"))
    );

    // The agent saw only what concerns it: its own message and the mention, not the bulk.
    let writer = home
        .ok("writer", &["--json", "tail", "parser", "--limit", "100"])
        .await;
    let texts: Vec<String> = writer
        .lines()
        .map(|line| json(line)["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, vec!["@dana/writer please review", "on it @sam"]);
}
