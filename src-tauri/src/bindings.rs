//! The window's typed interface: every command and event, described once here and
//! generated as TypeScript into `ui/src/bindings.ts` (a test fails when that file drifts;
//! `UPDATE_BINDINGS=1 cargo test -p roundtable-desktop --test bindings` writes it anew).

use tauri_specta::{collect_commands, collect_events};

use crate::alerts::{CoreChanged, OpenTarget};
use crate::commands::*;

/// Where the bindings live, from this crate's directory.
pub const BINDINGS: &str = "../ui/src/bindings.ts";

pub fn builder() -> tauri_specta::Builder<tauri::Wry> {
    tauri_specta::Builder::<tauri::Wry>::new()
        .commands(collect_commands![
            app_state,
            detect_agents,
            onboard_agent,
            offboard_agent,
            rooms,
            room_messages,
            send_message,
            create_room,
            invite_to_room,
            mark_read,
            directory,
            pings,
            answer_ping,
            contacts,
            request_contact,
            respond_contact,
            create_invite,
            invites,
            revoke_invite,
            redeem_invite,
            agents,
            control_agent,
            agent_token,
            connect_remote,
            use_embedded,
            share_on_network,
            task_board,
            architecture,
            component_history,
            costs,
            sessions,
            away,
            mark_looked,
            work_scan,
            started_at_ms,
            take_start_target,
            budgets,
            set_budget,
            remove_budget,
            open_link,
        ])
        .events(collect_events![CoreChanged, OpenTarget])
        // Counts, sequence numbers and times stay far below 2^53.
        .dangerously_cast_bigints_to_number()
        .disable_serde_phases()
}

pub fn typescript() -> specta_typescript::Typescript {
    specta_typescript::Typescript::default()
        .header("// Generated from src-tauri by tauri-specta: do not edit.\n// @ts-nocheck\n/* eslint-disable */")
}
