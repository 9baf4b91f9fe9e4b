//! Messages as agents write them: Markdown rendered in the real webview (code with a copy
//! button and colours, lists, tables), raw HTML shown as text and never run, a link that
//! opens in the system's browser only after the person saw its target, a long message
//! collapsed; the same renderer for an agent's question.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::harness::{Desk, PATIENCE};

/// A browser opener in the person's `~/.local/bin` that writes down what it was asked to
/// open, one line each.
fn with_browser(home: &Path) {
    let bin = home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opener = bin.join("xdg-open");
    std::fs::write(
        &opener,
        "#!/bin/sh\nprintf '%s\\n' \"$1\" >> \"$HOME/opened-links.txt\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
}

const MARKDOWN: &str = "## Lexer done\n\n\
Changes:\n\n\
- tokens for `fn` and `let`\n\
- **spans** on every token\n\n\
```rust\nfn lex(input: &str) -> Vec<Token> {\n    // one pass\n    todo_list(input)\n}\n```\n\n\
| file | lines |\n| --- | ---: |\n| src/lexer.rs | 120 |\n\n\
See [the guide](https://docs.example.com/guide) before merging.\n\n\
<img src=x onerror=\"document.title='owned'\"><script>document.title='owned'</script>";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_markdown_renders_safely_and_its_link_opens_in_the_browser_after_asking() {
    let desk = Desk::start("markdown", with_browser).await;
    desk.cli(&["agents", "register", "writer"]);
    desk.cli(&[
        "room",
        "create",
        "--title",
        "review",
        "--member",
        "dana/writer",
    ]);
    desk.cli(&["--profile", "dana.writer", "send", "review", MARKDOWN]);
    let long: String = (1..=200).map(|n| format!("log line {n}\n")).collect();
    desk.cli(&["--profile", "dana.writer", "send", "review", &long]);

    desk.go("rooms").await;
    let rooms: serde_json::Value = serde_json::from_str(&desk.cli(&["--json", "rooms"])).unwrap();
    let room = rooms
        .as_array()
        .unwrap()
        .iter()
        .find(|room| room["title"] == "review")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    desk.click(&format!("room-{room}")).await;
    desk.wait_css("[data-testid='message-text'] .code-block")
        .await;

    // What the window made of it: elements, not text; the script never ran.
    let shown = desk
        .script(
            "const text = [...document.querySelectorAll(\"[data-testid='message-text']\")]
               .find((m) => m.querySelector('.code-block'));
             return {
               heading: text.querySelector('h2')?.textContent,
               items: [...text.querySelectorAll('li')].map((li) => li.textContent),
               strong: text.querySelector('li strong')?.textContent,
               lang: text.querySelector('.code-lang')?.textContent,
               coloured: text.querySelectorAll('pre code span[class^=hljs-]').length,
               cells: [...text.querySelectorAll('td')].map((td) => td.textContent),
               link: text.querySelector('a')?.getAttribute('href'),
               images: text.querySelectorAll('img').length,
               scripts: text.querySelectorAll('script').length,
               raw: text.textContent.includes('<script>'),
               title: document.title,
             };",
            vec![],
        )
        .await;
    assert_eq!(shown["heading"], "Lexer done", "{shown}");
    assert_eq!(
        shown["items"],
        json!(["tokens for fn and let", "spans on every token"])
    );
    assert_eq!(shown["strong"], "spans");
    assert_eq!(shown["lang"], "rust");
    assert_eq!(shown["cells"], json!(["src/lexer.rs", "120"]));
    assert_eq!(shown["link"], "https://docs.example.com/guide");
    assert_eq!(
        (shown["images"].as_u64(), shown["scripts"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(shown["raw"], true, "raw HTML shows as text: {shown}");
    assert_ne!(shown["title"], "owned");
    // The highlighter arrives on its own: the code is coloured once it has.
    let started = Instant::now();
    while desk
        .script(
            "return document.querySelectorAll(\"[data-testid='message-text'] pre code span[class^=hljs-]\").length;",
            vec![],
        )
        .await
        .as_u64()
        == Some(0)
    {
        assert!(started.elapsed() < PATIENCE, "the code was never coloured");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // The long one shows its start and how much more there is.
    let more = desk.wait("show-more").await.text().await.unwrap();
    assert!(more.contains("Show more"), "{more}");
    let before = desk.window_text().await;
    assert!(
        before.contains("log line 20") && !before.contains("log line 200"),
        "collapsed"
    );
    desk.screenshot("markdown-message").await;
    desk.click("show-more").await;
    desk.wait_for_text("the whole log", |text| text.contains("log line 200"))
        .await;

    // The link asks first, showing where it goes; then the browser opens it, once.
    desk.click_css("[data-testid='message-text'] a[data-link]")
        .await;
    let target = desk.text("link-target").await;
    assert_eq!(target, "https://docs.example.com/guide");
    desk.screenshot("markdown-link-asks").await;
    let opened = desk.home().join("opened-links.txt");
    assert!(!opened.exists(), "nothing opens before the person says so");
    desk.click("link-open").await;
    let started = Instant::now();
    let links = loop {
        if let Ok(links) = std::fs::read_to_string(&opened) {
            break links;
        }
        assert!(started.elapsed() < PATIENCE, "the browser was never asked");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(links, "https://docs.example.com/guide\n");
    desk.finish().await;
}
