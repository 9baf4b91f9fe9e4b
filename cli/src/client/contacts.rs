//! The commands about who may reach whom: contacts, their requests, and invite links.

use roundtable_core::Core;
use roundtable_core::client::PATIENCE;
use roundtable_protocol::client::{ContactRespond, Contacts, InviteCreate, InviteRedeem};

use super::json::{ContactAnswered, InviteRevoked};
use super::{Failure, Out, call};

pub(super) async fn contacts(core: &Core, out: &Out) -> Result<(), Failure> {
    let contacts = call(core, Contacts { id: 0 }).await?;
    let mut lines: Vec<String> = contacts
        .contacts
        .iter()
        .map(|c| format!("contact  {}  ({})", c.handle, c.kind.as_str()))
        .collect();
    lines.extend(contacts.requests.iter().map(|r| {
        format!(
            "request  {}  {} -> {}  {}",
            r.id,
            r.from,
            r.to,
            r.message.as_deref().unwrap_or("")
        )
    }));
    out.show(
        if lines.is_empty() {
            "no contacts".into()
        } else {
            lines.join("\n")
        },
        &contacts,
    )
}

pub(super) async fn contact_request(
    core: &Core,
    out: &Out,
    handle: String,
    message: Option<String>,
) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let asked = core.request_contact(&handle, message, PATIENCE).await?;
    out.show(format!("asked {handle} (request {})", asked.id), &asked)
}

pub(super) async fn contact_respond(
    core: &Core,
    out: &Out,
    request: String,
    accept: bool,
) -> Result<(), Failure> {
    call(
        core,
        ContactRespond {
            id: 0,
            request: request.clone(),
            accept,
        },
    )
    .await?;
    out.show(
        format!("{} {request}", if accept { "accepted" } else { "declined" }),
        ContactAnswered {
            request: &request,
            accepted: accept,
        },
    )
}

pub(super) async fn invite_create(
    core: &Core,
    out: &Out,
    room: Option<String>,
    max_uses: u32,
    expires_in: Option<u64>,
) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let room = match room {
        Some(room) => Some(core.room_id(&room).await?),
        None => None,
    };
    let created = call(
        core,
        InviteCreate {
            id: 0,
            room,
            max_uses: Some(max_uses),
            expires_in_s: expires_in,
        },
    )
    .await?;
    let withdraw = created
        .invite
        .as_deref()
        .map(|id| format!("\nid: {id} (withdraw it with `roundtable invite revoke {id}`)"))
        .unwrap_or_default();
    out.show(
        format!("{}\ncode: {}{withdraw}", created.link, created.code),
        &created,
    )
}

pub(super) async fn invite_list(core: &Core, out: &Out) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let invites = core.invites().await?;
    let text = invites
        .iter()
        .map(|invite| {
            format!(
                "{}  {}  {} use{} left  expires {}",
                invite.id,
                invite.room.as_deref().unwrap_or("(contact only)"),
                invite.uses_left,
                if invite.uses_left == 1 { "" } else { "s" },
                invite.expires_at.as_deref().unwrap_or("never"),
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.show(
        if text.is_empty() {
            "no invites can be redeemed; create one with `roundtable invite create`".into()
        } else {
            text
        },
        &invites,
    )
}

pub(super) async fn invite_revoke(core: &Core, out: &Out, invite: &str) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    core.revoke_invite(invite).await?;
    out.show(
        format!("withdrew invite {invite}: its code no longer works"),
        InviteRevoked {
            invite,
            revoked: true,
        },
    )
}

pub(super) async fn invite_redeem(core: &Core, out: &Out, code: &str) -> Result<(), Failure> {
    let code = roundtable_core::screens::invite_code(code)?.to_owned();
    let redeemed = call(core, InviteRedeem { id: 0, code }).await?;
    out.show(
        match &redeemed.room {
            Some(room) => format!("redeemed: you are now a contact, and in room {}", room.id),
            None => "redeemed: you are now a contact".into(),
        },
        &redeemed,
    )
}
