//! `signup` and `login`: the two commands that make a profile, so they run without one.

use std::path::PathBuf;

use roundtable_protocol::client::SignupRequest;

use super::json::ProfileSaved;
use super::{Context, Failure, discoverable};
use crate::args::SignupArgs;

pub(super) async fn signup(cx: &Context, signup: SignupArgs) -> Result<(), Failure> {
    let invite = match signup.invite {
        Some(invite) => Some(roundtable_core::screens::invite_code(&invite)?.to_owned()),
        None => None,
    };
    let request = SignupRequest {
        name: signup.name.unwrap_or_else(|| signup.handle.clone()),
        handle: signup.handle,
        discoverable: discoverable(signup.discoverable)?,
        invite,
    };
    let profile = roundtable_core::signup(
        &cx.base,
        &cx.profile,
        &signup.hub,
        request,
        signup.ca_file,
        signup.insecure,
    )
    .await?;
    cx.out.show(
        format!(
            "signed up as {} on {}; profile {:?} saved (token in {})",
            profile.handle,
            profile.hub,
            profile.name,
            if profile.in_secret_store {
                "the OS secret store".to_owned()
            } else {
                profile.dir.join("token").display().to_string()
            }
        ),
        ProfileSaved {
            profile: &profile.name,
            principal: &profile.principal,
            handle: &profile.handle,
        },
    )
}

pub(super) async fn login(
    cx: &Context,
    hub: &str,
    token: String,
    ca_file: Option<PathBuf>,
    insecure: bool,
) -> Result<(), Failure> {
    let token = if token == "-" {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        line.trim().to_owned()
    } else {
        token
    };
    let profile =
        roundtable_core::login(&cx.base, &cx.profile, hub, &token, ca_file, insecure).await?;
    cx.out.show(
        format!(
            "logged in as {} on {}; profile {:?} saved",
            profile.handle, profile.hub, profile.name
        ),
        ProfileSaved {
            profile: &profile.name,
            principal: &profile.principal,
            handle: &profile.handle,
        },
    )
}
