//! `roundtable-bench-a2a`: what the A2A gateway costs a round trip, side by side with the
//! WebSocket in the same run.
//!
//! One `roundtable hub` process (rate limits off), an agent on a WebSocket that answers every
//! message it is sent with a reply pointing back at it, and one client asking it, one
//! question at a time:
//! - `websocket`: the client's own WebSocket; a `send` in the pair room, until the reply's
//!   event arrives;
//! - `a2a`: a blocking JSON-RPC `SendMessage` on one kept-alive HTTP/1.1 connection, until
//!   the completed task (with the reply as its artifact) is answered.
//!
//! Each round runs both ways (alternating which goes first); the report gives each run's
//! median and p99 and the medians' ratio.

#![allow(clippy::print_stdout, reason = "the report goes to stdout")]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use roundtable_bench::side_by_side::RunMedians;
use roundtable_protocol::ServerFrame;
use roundtable_protocol::client::{
    ClientFrame, ContactRequestCmd, ContactRespond, RegisterAgent, SendCmd, SyncCmd,
};
use roundtable_protocol::model::Discoverable;
use roundtable_protocol::server::{ContactRequestOk, RegisterAgentOk};
use roundtable_testkit::{Client, HubProcess, Incoming, signup};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

#[derive(Debug, Parser)]
#[command(
    name = "roundtable-bench-a2a",
    about = "A2A vs WebSocket round trips, one run."
)]
struct Args {
    /// Round trips measured per way and round.
    #[arg(long, default_value_t = 500)]
    trips: usize,
    /// Round trips before measuring, per way and round.
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Rounds; each runs both ways.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The `roundtable` binary (default: next to this one).
    #[arg(long)]
    hub_bin: Option<PathBuf>,
}

/// A kept-alive HTTP/1.1 connection for JSON-RPC posts.
struct Http {
    reader: BufReader<tokio::io::ReadHalf<tokio::net::TcpStream>>,
    writer: tokio::io::WriteHalf<tokio::net::TcpStream>,
    addr: SocketAddr,
    token: String,
}

impl Http {
    async fn connect(addr: SocketAddr, token: &str) -> Result<Http> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (reader, writer) = tokio::io::split(stream);
        Ok(Http {
            reader: BufReader::new(reader),
            writer,
            addr,
            token: token.to_owned(),
        })
    }

    async fn post(&mut self, path: &str, body: &str) -> Result<Value> {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        );
        self.writer.write_all(request.as_bytes()).await?;
        let mut status = String::new();
        self.reader.read_line(&mut status).await?;
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).await?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse()?;
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).await?;
        if !status.contains(" 200 ") {
            bail!("{status}: {}", String::from_utf8_lossy(&body));
        }
        Ok(serde_json::from_slice(&body)?)
    }
}

/// The reviewer: answers every message from `asker` with `ok: <text>`, pointing back at it.
async fn answer(mut agent: Client, asker: String) -> Result<()> {
    let mut n = 0u64;
    loop {
        let event = match agent.backlog.pop_front() {
            Some(frame) => Incoming::Frame(frame),
            None => match agent.recv_within(Duration::from_secs(3600)).await? {
                Some(incoming) => incoming,
                None => continue,
            },
        };
        let Incoming::Frame(ServerFrame::Evt(event)) = event else {
            if matches!(event, Incoming::Closed(_)) {
                return Ok(());
            }
            continue;
        };
        if event.kind != "message" || event.from != asker {
            continue;
        }
        n += 1;
        let text = event.body["text"].as_str().unwrap_or_default();
        let frame = ClientFrame::Send(SendCmd {
            id: n,
            room: event.stream_name().to_owned(),
            client_key: format!("answer-{n:08}"),
            kind: "message".into(),
            body: json!({"text": format!("ok: {text}"), "reply_to": event.id}),
        });
        agent.send_frame(&frame).await?;
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds")
}

async fn websocket_trips(
    client: &mut Client,
    room: &str,
    trips: usize,
    tag: &str,
) -> Result<Histogram<u64>> {
    let mut latencies = histogram();
    for n in 0..trips {
        let started = Instant::now();
        let text = format!("{tag}-{n}");
        let id = client.id();
        client
            .send_frame(&ClientFrame::Send(SendCmd {
                id,
                room: room.to_owned(),
                client_key: format!("ws-{tag}-{n:08}"),
                kind: "message".into(),
                body: json!({"text": text}),
            }))
            .await?;
        let wanted = format!("ok: {text}");
        loop {
            let frame = match client.backlog.pop_front() {
                Some(frame) => frame,
                None => match client.recv().await? {
                    Incoming::Frame(frame) => frame,
                    Incoming::Closed(code) => bail!("the client's connection closed ({code:?})"),
                },
            };
            if let ServerFrame::Evt(event) = frame
                && event.body["text"] == wanted.as_str()
            {
                break;
            }
        }
        latencies.record(started.elapsed().as_micros() as u64)?;
    }
    Ok(latencies)
}

async fn a2a_trips(http: &mut Http, trips: usize, tag: &str) -> Result<Histogram<u64>> {
    let mut latencies = histogram();
    for n in 0..trips {
        let started = Instant::now();
        let body = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": {
            "message": {"messageId": format!("a2a-{tag}-{n}"), "role": "ROLE_USER",
                        "parts": [{"text": format!("{tag}-{n}")}]}}})
        .to_string();
        let answer = http.post("/a2a/dana/reviewer", &body).await?;
        let state = &answer["result"]["task"]["status"]["state"];
        if state != "TASK_STATE_COMPLETED" {
            bail!("the task ended {state}: {answer}");
        }
        latencies.record(started.elapsed().as_micros() as u64)?;
    }
    Ok(latencies)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let hub_bin = match &args.hub_bin {
        Some(path) => path.clone(),
        None => roundtable_testkit::roundtable_beside_this_binary()?,
    };
    let data = tempfile::tempdir()?;
    let hub = HubProcess::start(&hub_bin, data.path(), &["--no-rate-limit"]).await;
    let dana = signup(hub.addr, "dana").await?;
    let erin = signup(hub.addr, "erin").await?;
    let mut owner = Client::connect(&hub.ws_url()).await?;
    owner.auth(&dana.token, "laptop").await?;
    let id = owner.id();
    let reviewer: RegisterAgentOk = owner
        .ok(ClientFrame::RegisterAgent(RegisterAgent {
            id,
            name: "reviewer".into(),
            description: None,
            card: None,
            discoverable: Some(Discoverable::Public),
        }))
        .await
        .decode()?;
    let mut client = Client::connect(&hub.ws_url()).await?;
    client.auth(&erin.token, "laptop").await?;
    let id = client.id();
    let request: ContactRequestOk = client
        .ok(ClientFrame::ContactRequest(ContactRequestCmd {
            id,
            to: "dana/reviewer".into(),
            message: None,
        }))
        .await
        .decode()?;
    let id = owner.id();
    owner
        .ok(ClientFrame::ContactRespond(ContactRespond {
            id,
            request: request.request.id,
            accept: true,
        }))
        .await;
    let mut agent = Client::connect(&hub.ws_url()).await?;
    agent.auth(&reviewer.token, "reviewer").await?;
    let id = agent.id();
    agent
        .ok(ClientFrame::Sync(SyncCmd {
            id,
            cursors: Default::default(),
        }))
        .await;
    let answering = tokio::spawn(answer(agent, erin.principal.id.clone()));
    let mut http = Http::connect(hub.addr, &erin.token).await?;
    // The first A2A message makes the pair room; the WebSocket side then uses it too.
    a2a_trips(&mut http, 1, "setup").await?;
    let room = client
        .ok(ClientFrame::Rooms(roundtable_protocol::client::Rooms {
            id: 9,
        }))
        .await
        .decode::<roundtable_protocol::server::RoomsOk>()?
        .rooms
        .into_iter()
        .find(|room| {
            room.members
                .iter()
                .any(|member| member.id == reviewer.agent.id)
        })
        .context("the pair room")?;
    let (room, head) = (room.id, room.head);
    // Live from the room's head on: what came before is not replayed.
    let id = client.id();
    client
        .ok(ClientFrame::Sync(SyncCmd {
            id,
            cursors: [(room.clone(), head)].into_iter().collect(),
        }))
        .await;
    client.backlog.clear();

    println!(
        "# roundtable-bench-a2a: {} round trips per way and run after {} of warm-up, {} runs; one hub process, SQLite, rate limits off",
        args.trips, args.warmup, args.runs
    );
    let mut medians = RunMedians::default();
    for run in 1..=args.runs {
        let ways: [&str; 2] = if run % 2 == 1 {
            ["websocket", "a2a"]
        } else {
            ["a2a", "websocket"]
        };
        for way in ways {
            // Each way's texts are its own: the client also receives the A2A replies, in
            // the same room, and must not take one for a reply of its own.
            let tag = format!("{way}-r{run}");
            client.backlog.clear();
            let latencies = match way {
                "websocket" => {
                    websocket_trips(&mut client, &room, args.warmup, &format!("{tag}w")).await?;
                    websocket_trips(&mut client, &room, args.trips, &tag).await?
                }
                _ => {
                    a2a_trips(&mut http, args.warmup, &format!("{tag}w")).await?;
                    a2a_trips(&mut http, args.trips, &tag).await?
                }
            };
            medians.record(run, way, &latencies, 2);
        }
    }
    let (ws, a2a) = (medians.of("websocket"), medians.of("a2a"));
    println!();
    println!(
        "median of medians: websocket {ws:.2} ms, a2a {a2a:.2} ms; a2a / websocket = {:.2}x",
        a2a / ws
    );
    answering.abort();
    hub.terminate().await;
    Ok(())
}
