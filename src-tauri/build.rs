//! Generates Tauri's context, and the permissions of the app's own commands: the window
//! may call exactly these (see `capabilities/default.json`).

fn main() {
    tauri_build::try_build(tauri_build::Attributes::new().app_manifest(
        tauri_build::AppManifest::new().commands(&[
            "app_state",
            "detect_agents",
            "onboard_agent",
            "offboard_agent",
            "rooms",
            "room_messages",
            "send_message",
            "create_room",
            "invite_to_room",
            "mark_read",
            "directory",
            "pings",
            "answer_ping",
            "contacts",
            "request_contact",
            "respond_contact",
            "create_invite",
            "invites",
            "revoke_invite",
            "redeem_invite",
            "agents",
            "control_agent",
            "agent_token",
            "connect_remote",
            "use_embedded",
            "share_on_network",
            "task_board",
            "architecture",
            "component_history",
            "costs",
            "sessions",
            "away",
            "mark_looked",
            "work_scan",
            "started_at_ms",
            "take_start_target",
        ]),
    ))
    .expect("tauri-build");
}
