//! The same workload against NATS JetStream: a file-storage stream per room, a durable pull
//! consumer per member, every publish awaiting its acknowledgement, a connection per member.

use std::future::IntoFuture;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::Barrier;

use crate::measure::{Clock, CpuUse, Outcome, Shape, Tally, parse_payload, payload};

/// `nats-server --version`, or why it is unavailable.
pub async fn version(bin: &Path) -> String {
    match tokio::process::Command::new(bin)
        .arg("--version")
        .output()
        .await
    {
        Ok(output) => String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        Err(error) => format!("unavailable ({error})"),
    }
}

struct Server {
    child: tokio::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

async fn start(bin: &Path, jetstream_extra: Option<&str>) -> Result<Server> {
    let dir = tempfile::tempdir()?;
    let ports = dir.path().join("ports");
    std::fs::create_dir_all(&ports)?;
    let config = format!(
        "listen: \"127.0.0.1:-1\"\nports_file_dir: \"{}\"\nmax_payload: 1MB\nlog_file: \"/dev/null\"\n\
         jetstream {{\n  store_dir: \"{}\"\n  max_memory_store: 256MB\n  max_file_store: 8GB\n  {}\n}}\n",
        ports.display(),
        dir.path().join("js").display(),
        jetstream_extra.unwrap_or("")
    );
    let config_path = dir.path().join("nats.conf");
    std::fs::write(&config_path, config)?;
    let child = tokio::process::Command::new(bin)
        .arg("-c")
        .arg(&config_path)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let url = loop {
        if let Some(entry) = std::fs::read_dir(&ports)?.flatten().next() {
            let text = std::fs::read_to_string(entry.path())?;
            let parsed: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if let Some(url) = parsed["nats"][0].as_str() {
                break url.to_owned();
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!("nats-server did not write its ports file");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    Ok(Server {
        child,
        url,
        _dir: dir,
    })
}

fn context(client: async_nats::Client) -> jetstream::Context {
    jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(30))
        .max_ack_inflight(20_000)
        .build(client)
}

pub async fn run(bin: &Path, jetstream_extra: Option<&str>, shape: Shape) -> Result<Outcome> {
    let mut server = start(bin, jetstream_extra).await?;
    let admin = context(async_nats::connect(&server.url).await?);
    for room in 0..shape.rooms {
        let created = admin
            .create_stream(stream::Config {
                name: format!("ROOM_{room}"),
                subjects: vec![format!("room.{room}")],
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await
            .map_err(|error| anyhow!("creating stream {room}: {error}"))?;
        for member in 0..shape.members {
            let name = format!("m{}", room * shape.members + member);
            created
                .create_consumer(consumer::pull::Config {
                    durable_name: Some(name),
                    ack_policy: consumer::AckPolicy::None,
                    deliver_policy: consumer::DeliverPolicy::New,
                    ..Default::default()
                })
                .await
                .map_err(|error| anyhow!("creating a consumer: {error}"))?;
        }
    }
    let total_members = shape.rooms * shape.members;
    let barrier = Arc::new(Barrier::new(total_members + 1));
    let clock_cell = Arc::new(OnceLock::new());
    let tasks: Vec<_> = (0..total_members)
        .map(|index| {
            tokio::spawn(member_task(
                server.url.clone(),
                index,
                shape,
                barrier.clone(),
                clock_cell.clone(),
            ))
        })
        .collect();
    barrier.wait().await;
    let clock = Clock::new(&shape);
    clock_cell
        .set(clock)
        .map_err(|_| anyhow!("clock set twice"))?;
    let cpu = CpuUse::sample(server.child.id().into_iter().collect(), clock);
    barrier.wait().await;
    let mut total = Tally::default();
    for task in tasks {
        total.merge(task.await??);
    }
    if let Some(pid) = server.child.id() {
        let _ = tokio::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), server.child.wait()).await;
    Ok(Outcome::from_tally(&total, shape.measure, cpu.await?))
}

async fn member_task(
    url: String,
    index: usize,
    shape: Shape,
    barrier: Arc<Barrier>,
    clock_cell: Arc<OnceLock<Clock>>,
) -> Result<Tally> {
    let room = index / shape.members;
    let subject = format!("room.{room}");
    let js = context(async_nats::connect(&url).await?);
    let stream = js
        .get_stream(format!("ROOM_{room}"))
        .await
        .map_err(|error| anyhow!("{error}"))?;
    let consumer: consumer::PullConsumer = stream
        .get_consumer(&format!("m{index}"))
        .await
        .map_err(|error| anyhow!("{error}"))?;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(500)
        .heartbeat(Duration::from_secs(5))
        .messages()
        .await
        .map_err(|error| anyhow!("{error}"))?;
    barrier.wait().await;
    barrier.wait().await;
    let clock = *clock_cell.get().context("clock")?;

    let mut tally = Tally::default();
    let mut in_flight = FuturesUnordered::new();
    let grace = clock.measure_until + Duration::from_secs(5);
    let mut ticker = shape.send_interval().map(|interval| {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        ticker
    });
    loop {
        let done = clock.done();
        if done && in_flight.is_empty() {
            break;
        }
        if !done && ticker.is_none() {
            while in_flight.len() < shape.window {
                let ack = js
                    .publish(subject.clone(), Bytes::from(payload(index, clock.micros())))
                    .await
                    .map_err(|error| anyhow!("publish: {error}"))?;
                in_flight.push(ack.into_future());
            }
        }
        tokio::select! {
            Some(ack) = in_flight.next(), if !in_flight.is_empty() => {
                ack.map_err(|error| anyhow!("publish ack: {error}"))?;
                tally.acknowledged(&clock);
            }
            message = messages.next() => {
                match message {
                    Some(Ok(message)) => {
                        if let Some((sender, micros)) = std::str::from_utf8(&message.payload).ok().and_then(parse_payload) {
                            tally.delivered(&clock, index, sender, micros);
                        }
                    }
                    Some(Err(error)) => eprintln!("consumer m{index}: {error}"),
                    None => bail!("consumer m{index} ended"),
                }
            }
            _ = async {
                match ticker.as_mut() {
                    Some(ticker) if !done => { ticker.tick().await; }
                    _ => std::future::pending::<()>().await,
                }
            } => {
                if in_flight.len() < 10_000 {
                    let ack = js
                        .publish(subject.clone(), Bytes::from(payload(index, clock.micros())))
                        .await
                        .map_err(|error| anyhow!("publish: {error}"))?;
                    in_flight.push(ack.into_future());
                }
            }
            _ = tokio::time::sleep_until(grace.into()) => break,
            _ = tokio::time::sleep_until(clock.measure_until.into()), if !done => {}
        }
    }
    Ok(tally)
}
