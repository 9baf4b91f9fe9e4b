//! Budgets as a person keeps them: set with `roundtable budget set`, kept by the core's
//! watch as an agent's usage reaches the person's cache from the hub. The usage event that
//! crosses the budget pauses the agent before the next one, with a reason the agent is told
//! and the hub's audit log keeps; the warning at 80 % and the pause are done once. A
//! teammate's figures count at what their tokens can cost at this machine's prices, and one
//! only the teammate vouches for (a model unpriced here) never pauses anything.

use roundtable_core::budgets::BudgetLevel;
use roundtable_core::client::PATIENCE;
use roundtable_core::errors::{FailureCode, Outcome};
use roundtable_core::wait_for::{Arrived, WaitFilter};
use roundtable_core::work::pricing::Pricing;
use roundtable_core::{Core, now_ms};
use roundtable_e2e::{Home, Hub, json};
use roundtable_protocol::ErrorCode;
use roundtable_protocol::client::{Audit, ControlAction};
use roundtable_testkit::{eventually, until};
use serde_json::json as value;

/// Sends a usage event of `cost` dollars for `writer`'s session to `room`, and waits for the
/// hub to take it.
async fn spend(writer: &Core, room: &str, n: u32, cost: f64) {
    let now = roundtable_protocol::ts::format_millis(now_ms());
    let body = value!({
        "session": {"agent": writer.me(), "framework": "claude-code", "session_id": format!("s{n}")},
        "model": "claude-sonnet-4-5", "input": 1000, "output": 100, "cache_write": 0,
        "cache_read": 0, "cost_usd": cost, "from": now, "to": now
    });
    let sent = writer.send(room, "usage", body).await.unwrap();
    writer.wait(sent, PATIENCE).await.unwrap();
}

/// How much Dana's cache has seen the writer spend today.
async fn seen(dana: &Core) -> f64 {
    let board = dana
        .budget_board(now_ms(), Pricing::built_in())
        .await
        .unwrap();
    board.states[0].spent_usd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_event_that_crosses_a_budget_pauses_the_agent_before_the_next_one() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    home.ok("dana", &["agents", "register", "writer"]).await;
    // Bad budgets say what to write instead, and keep nothing.
    let bad = home
        .fails("dana", &["budget", "set", "agent", "writer", "0"], 1)
        .await;
    assert!(bad.contains("positive number of dollars"), "{bad}");
    let bad = home
        .fails("dana", &["budget", "set", "planet", "writer", "5"], 2)
        .await;
    assert!(bad.contains("write agent, person or team"), "{bad}");
    let set = home
        .ok(
            "dana",
            &["budget", "set", "agent", "writer", "0.01", "--per", "day"],
        )
        .await;
    assert!(set.contains("dana/writer's $0.01 a day"), "{set}");

    let dana = Core::open(home.profile("dana")).await.unwrap();
    let sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    let _keeping = dana.watch_budgets(Pricing::built_in());
    let writer = Core::open(home.profile("dana.writer")).await.unwrap();
    let writer_sync = writer.start();
    writer.synced(PATIENCE).await.unwrap();
    let room = writer.home_room().await.unwrap();
    let after = writer.read(|cache| cache.cursor("inbox")).await.unwrap();
    let told = {
        let writer = writer.clone();
        tokio::spawn(async move {
            writer
                .wait_for(
                    &WaitFilter::Control { after },
                    std::time::Duration::from_secs(60),
                )
                .await
        })
    };

    // 60 %: nothing to say.
    spend(&writer, &room, 1, 0.006).await;
    until("Dana sees 60 %", PATIENCE, async || {
        (seen(&dana).await - 0.006).abs() < 1e-9
    })
    .await;
    // 90 %: a warning, once.
    spend(&writer, &room, 2, 0.003).await;
    let near = eventually("the warning", PATIENCE, async || {
        let board = dana
            .budget_board(now_ms(), Pricing::built_in())
            .await
            .unwrap();
        (!board.alerts.is_empty()).then_some(board)
    })
    .await;
    assert_eq!(near.alerts.len(), 1, "{:?}", near.alerts);
    assert_eq!(near.alerts[0].level, BudgetLevel::Near);
    assert!(
        near.alerts[0]
            .text
            .starts_with("$0.009 of dana/writer's $0.01 a day spent (90%)"),
        "{}",
        near.alerts[0].text
    );
    assert!(!told.is_finished(), "a warning pauses nothing");

    // 110 %: the event that crosses it pauses the writer, who is told why.
    spend(&writer, &room, 3, 0.002).await;
    let Arrived::Control { controls } = told.await.unwrap().unwrap() else {
        panic!("the writer was not told of a control")
    };
    assert_eq!(controls.len(), 1, "{controls:?}");
    assert_eq!(controls[0].action, ControlAction::Pause);
    let reason = controls[0].reason.clone().unwrap();
    assert!(
        reason.starts_with("budget reached: dana/writer's $0.01 a day ($0.011 spent since "),
        "{reason}"
    );
    // Its messages are refused with the reason; its usage still reaches its owner.
    let refused = writer.send_message(&room, "one more thing").await.unwrap();
    match writer.wait(refused, PATIENCE).await {
        Ok(Outcome::Failed { code, msg }) => {
            assert_eq!(code, FailureCode::Hub(ErrorCode::Paused));
            let quoted = serde_json::to_string(&reason).unwrap();
            assert!(
                msg.ends_with(&format!("Reason, as dana wrote it (JSON-quoted): {quoted}")),
                "{msg}"
            );
        }
        other => panic!("a paused agent's message went through: {other:?}"),
    }
    spend(&writer, &room, 4, 0.004).await;
    until(
        "Dana sees the spend after the pause",
        PATIENCE,
        async || (seen(&dana).await - 0.015).abs() < 1e-9,
    )
    .await;
    // Kept once: nothing more to do this period, and the person's views say what was done.
    assert!(
        dana.keep_budgets(now_ms(), Pricing::built_in())
            .await
            .unwrap()
            .is_empty()
    );
    let listed = home.ok("dana", &["budget"]).await;
    assert!(listed.contains("REACHED"), "{listed}");
    assert!(listed.contains("budget reached: dana/writer's"), "{listed}");
    let board = json(&home.ok("dana", &["--json", "budget"]).await);
    assert_eq!(board["alerts"].as_array().unwrap().len(), 2, "{board}");
    assert_eq!(board["states"][0]["level"], "reached");
    // The person's own record of the pause keeps the reason too.
    let me = dana.me().to_owned();
    let issued = dana
        .read(move |cache| cache.issued_controls(&me))
        .await
        .unwrap();
    let writer_id = writer.me().to_owned();
    assert_eq!(
        issued[&writer_id][0].reason.as_deref(),
        Some(reason.as_str())
    );

    // The hub's audit log keeps the reason with the pause.
    let audit = dana
        .call(
            Audit {
                id: 0,
                principal: None,
                since: None,
                limit: Some(100),
            },
            PATIENCE,
        )
        .await
        .unwrap();
    let control = audit
        .entries
        .iter()
        .find(|entry| entry.action == "control")
        .unwrap();
    assert_eq!(control.reason.as_deref(), Some(reason.as_str()));

    // A resume by the person stands: the budget does not pause the writer again this period.
    home.ok("dana", &["agents", "resume", "writer"]).await;
    let sent = writer.send_message(&room, "back").await.unwrap();
    writer.wait(sent, PATIENCE).await.unwrap();
    spend(&writer, &room, 5, 0.001).await;
    until(
        "Dana sees the spend after the resume",
        PATIENCE,
        async || (seen(&dana).await - 0.016).abs() < 1e-9,
    )
    .await;
    assert!(
        dana.keep_budgets(now_ms(), Pricing::built_in())
            .await
            .unwrap()
            .is_empty()
    );
    home.ok("dana", &["budget", "remove", "agent", "dana/writer"])
        .await;
    home.fails("dana", &["budget", "remove", "agent", "dana/writer"], 1)
        .await;
    writer_sync.stop().await;
    sync.stop().await;
}

/// Budgets kept from several places at once (the app's watch, `roundtable budget check`,
/// a check of their own) tell each action once: the first to record it tells it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_kept_from_several_places_at_once_tell_each_action_once() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    home.ok("dana", &["agents", "register", "writer"]).await;
    home.ok(
        "dana",
        &["budget", "set", "agent", "writer", "0.01", "--per", "day"],
    )
    .await;
    let dana = Core::open(home.profile("dana")).await.unwrap();
    let sync = dana.start();
    dana.synced(PATIENCE).await.unwrap();
    let writer = Core::open(home.profile("dana.writer")).await.unwrap();
    let writer_sync = writer.start();
    writer.synced(PATIENCE).await.unwrap();
    let room = writer.home_room().await.unwrap();
    spend(&writer, &room, 1, 0.009).await;
    until("Dana sees 90 %", PATIENCE, async || {
        (seen(&dana).await - 0.009).abs() < 1e-9
    })
    .await;
    let keep = || dana.keep_budgets(now_ms(), Pricing::built_in());
    let (a, b, c, d) = tokio::join!(keep(), keep(), keep(), keep());
    let told: Vec<_> = [a, b, c, d]
        .into_iter()
        .flat_map(|alerts| alerts.unwrap())
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].level, BudgetLevel::Near);
    writer_sync.stop().await;
    sync.stop().await;
}

/// Sends a usage event of `model` for `agent`'s session: a thousand input and a hundred output
/// tokens at `cost` dollars, as its machine reports them.
async fn report(agent: &Core, room: &str, n: u32, model: &str, cost: f64) {
    let now = roundtable_protocol::ts::format_millis(now_ms());
    let body = value!({
        "session": {"agent": agent.me(), "framework": "claude-code", "session_id": format!("t{n}")},
        "model": model, "input": 1000, "output": 100, "cache_write": 0,
        "cache_read": 0, "cost_usd": cost, "from": now, "to": now
    });
    let sent = agent.send(room, "usage", body).await.unwrap();
    agent.wait(sent, PATIENCE).await.unwrap();
}

/// A teammate's machine says what its agent's work cost; Dana's prices say what its tokens
/// can cost. A figure only the teammate vouches for never pauses Dana's agents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammates_reported_cost_never_pauses_my_agents_on_their_word_alone() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    home.signup(&hub, "sam").await;
    home.ok("dana", &["room", "create", "--title", "core"])
        .await;
    let invite = json(
        &home
            .ok("dana", &["--json", "invite", "create", "--room", "core"])
            .await,
    );
    home.ok(
        "sam",
        &["invite", "redeem", invite["link"].as_str().unwrap()],
    )
    .await;
    home.ok("dana", &["agents", "register", "writer"]).await;
    home.ok("sam", &["agents", "register", "bot"]).await;
    home.ok("dana", &["room", "invite", "core", "dana/writer"])
        .await;
    home.ok("sam", &["room", "invite", "core", "sam/bot"]).await;
    std::fs::write(
        home.profile("dana").dir.join("teams.toml"),
        "[teams]\ncore = [\"dana\", \"sam\"]\n",
    )
    .unwrap();
    home.ok(
        "dana",
        &["budget", "set", "team", "core", "1", "--per", "day"],
    )
    .await;

    let dana = Core::open(home.profile("dana")).await.unwrap();
    let sync = dana.start();
    let writer = Core::open(home.profile("dana.writer")).await.unwrap();
    let writer_sync = writer.start();
    let bot = Core::open(home.profile("sam.bot")).await.unwrap();
    let bot_sync = bot.start();
    for core in [&dana, &writer, &bot] {
        core.synced(PATIENCE).await.unwrap();
    }
    let room = writer.room_id("core").await.unwrap();
    report(&writer, &room, 1, "claude-sonnet-4-5", 0.004).await;
    // Sam's machine claims a million dollars for a thousand tokens of a model priced here.
    report(&bot, &room, 2, "claude-sonnet-4-5", 1_000_000.0).await;
    until("Dana sees both reports", PATIENCE, async || {
        let board = dana.cost_board(None, Pricing::built_in()).await.unwrap();
        board.rows.len() == 2
    })
    .await;
    // Counted at what those tokens can cost here: cents, under the budget.
    let spent = seen(&dana).await;
    assert!(spent < 0.02, "{spent}");
    assert!(
        dana.keep_budgets(now_ms(), Pricing::built_in())
            .await
            .unwrap()
            .is_empty()
    );

    // A model this machine has no price for: Sam's figure is shown and warns, and says whose
    // it is; it pauses nothing.
    report(&bot, &room, 3, "homegrown-9", 1_000_000.0).await;
    until("Dana sees Sam's unpriced report", PATIENCE, async || {
        seen(&dana).await > 1.0
    })
    .await;
    let alerts = dana
        .keep_budgets(now_ms(), Pricing::built_in())
        .await
        .unwrap();
    assert!(
        alerts.iter().all(|alert| alert.agent.is_none()),
        "{alerts:?}"
    );
    let reached = alerts
        .iter()
        .find(|alert| alert.level == BudgetLevel::Reached)
        .unwrap_or_else(|| panic!("Dana is told: {alerts:?}"));
    assert!(reached.text.contains("sam"), "{}", reached.text);
    assert!(reached.text.contains("homegrown-9"), "{}", reached.text);
    assert!(
        reached.text.contains("nothing was paused"),
        "{}",
        reached.text
    );
    // The writer still speaks in the room.
    let sent = writer.send_message(&room, "still here").await.unwrap();
    assert!(
        matches!(writer.wait(sent, PATIENCE).await, Ok(Outcome::Done(_))),
        "the writer was paused"
    );
    bot_sync.stop().await;
    writer_sync.stop().await;
    sync.stop().await;
}
