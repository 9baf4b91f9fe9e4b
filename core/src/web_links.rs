//! Links in what agents and people write open in the person's browser, never in the app's
//! own window (which holds their session with the hub). A message's author chooses the
//! target, so only web and mail addresses are opened (a mail link with its address, subject
//! and body only: no attachments, no other recipients), and the window shows a link's full
//! target before opening it. This is the check the app makes again before handing a link to
//! the system, whatever the window sent.

use crate::CoreError;

/// The longest link opened.
pub const MAX_LEN: usize = 4096;

/// The link to open, normalized (`https://example.com/`), if it is one a browser or a mail
/// program should open: `http`, `https` (with a host) or `mailto`. Pure.
pub fn checked_link(text: &str) -> Result<String, CoreError> {
    let refuse = |why: &str| {
        Err(CoreError::Invalid(format!(
            "this link is not opened: {why}. Copy it if you trust it"
        )))
    };
    if text.len() > MAX_LEN {
        return refuse(&format!("it is longer than {MAX_LEN} bytes"));
    }
    if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return refuse("it holds spaces or control characters");
    }
    let Ok(url) = url::Url::parse(text) else {
        return refuse("it is not a full address such as https://example.com/");
    };
    match url.scheme() {
        "http" | "https" if url.host_str().is_some_and(|host| !host.is_empty()) => {}
        "http" | "https" => return refuse("it names no host"),
        "mailto" => return Ok(mail_link(&url)),
        other => {
            return refuse(&format!(
                "only web (https) and mail links open, not {other}:"
            ));
        }
    }
    Ok(url.to_string())
}

/// The fields of a mail link kept: what the mail is about and what it says.
const MAIL_FIELDS: [&str; 2] = ["subject", "body"];

/// A mail link as opened: its address, `subject` and `body`, nothing else. A mail program
/// takes other fields as more recipients (`cc`, `bcc`, `to`) or as files to attach
/// (`attach`), which a message's author should not choose for the person. The kept fields
/// stay as written (in a mail link `+` is a plus, not a space). Pure; the window's
/// `openableTarget` does the same.
fn mail_link(url: &url::Url) -> String {
    let kept: Vec<&str> = url
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|field| {
            let name = field.split('=').next().unwrap_or_default();
            MAIL_FIELDS
                .iter()
                .any(|kept| name.eq_ignore_ascii_case(kept))
        })
        .collect();
    if kept.is_empty() {
        format!("mailto:{}", url.path())
    } else {
        format!("mailto:{}?{}", url.path(), kept.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window's in-memory backend takes from here (`ui/src/backend/fixtures/links.json`)
    /// which links open, and as what.
    #[test]
    fn the_uis_link_verdicts_are_the_cores_own() {
        let links = [
            "https://example.com",
            "http://example.com/a?b=c#d",
            "HTTPS://Example.com/Path",
            "mailto:dana@example.com",
            "mailto:dana@example.com?subject=hi&cc=eve@example.com&body=yes",
            "javascript:alert(1)",
            "file:///etc/passwd",
            "roundtable://invite/TEAMHUB42",
            "ftp://example.com/file",
            "https://",
            "http:///path",
            "example.com",
            "/relative/path",
            "",
            "https://example.com/a b",
            "https://exa\nmple.com",
        ];
        let cases: Vec<_> = links
            .iter()
            .map(|url| serde_json::json!({ "url": url, "outcome": crate::ui_outcome(checked_link(url)) }))
            .collect();
        crate::keep_ui_fixture(
            "links.json",
            &serde_json::json!({ "cases": cases }),
            "link_verdicts",
        );
    }

    #[test]
    fn web_and_mail_links_open_normalized() {
        assert_eq!(
            checked_link("https://example.com").unwrap(),
            "https://example.com/"
        );
        assert_eq!(
            checked_link("HTTP://Example.COM/a?b=c#d").unwrap(),
            "http://example.com/a?b=c#d"
        );
        assert_eq!(
            checked_link("mailto:dana@example.com").unwrap(),
            "mailto:dana@example.com"
        );
        // A look-alike host is shown and opened as what it is.
        assert_eq!(
            checked_link("https://exаmple.com/").unwrap(),
            "https://xn--exmple-4nf.com/"
        );
    }

    #[test]
    fn a_mail_link_keeps_only_its_address_subject_and_body() {
        assert_eq!(
            checked_link("mailto:dana@example.com?attach=/home/dana/.ssh/id_ed25519").unwrap(),
            "mailto:dana@example.com"
        );
        assert_eq!(
            checked_link(
                "mailto:dana@example.com?subject=Hi%20there&cc=eve@evil.example&body=See%20you\
                 &bcc=eve@evil.example&Attachment=~/.aws/credentials&X-Header=1#frag"
            )
            .unwrap(),
            "mailto:dana@example.com?subject=Hi%20there&body=See%20you"
        );
        // However the names are spelled, only those two stay.
        assert_eq!(
            checked_link("mailto:dana@example.com?BODY=x&ATTACH=y&Subject=z").unwrap(),
            "mailto:dana@example.com?BODY=x&Subject=z"
        );
        assert_eq!(
            checked_link("mailto:dana@example.com?").unwrap(),
            "mailto:dana@example.com"
        );
    }

    #[test]
    fn anything_else_is_refused_with_what_to_do() {
        for link in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "file:///etc/passwd",
            "vbscript:msgbox",
            "roundtable://invite/abc",
            "/relative/path",
            "//example.com/x",
            "https://",
            "https://exa mple.com",
            "https://example.com/\n",
            "",
        ] {
            match checked_link(link) {
                Err(CoreError::Invalid(message)) => {
                    assert!(message.contains("Copy it if you trust it"), "{message}")
                }
                other => panic!("{link:?} gave {other:?}"),
            }
        }
        assert!(checked_link(&format!("https://example.com/{}", "a".repeat(MAX_LEN))).is_err());
    }
}
