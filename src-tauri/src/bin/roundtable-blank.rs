//! The desktop benchmark's baseline (`benches/desktop.rs`): a blank Tauri window built the
//! same way as the app — the same `tauri` crate and features, the same `tauri.conf.json`
//! (window size, content policy, identifier), the same webview engine and process model —
//! showing `ui/public/blank.html` (one word, and the same first-paint probe as the app's
//! page). Nothing of Roundtable runs in it: no plugins, no hub, no core, no tray, no commands.

// No console window on Windows in release builds, as the app.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    let mut context = tauri::generate_context!();
    for window in &mut context.config_mut().app.windows {
        window.url = tauri::WebviewUrl::App("blank.html".into());
    }
    if let Err(error) = tauri::Builder::default().run(context) {
        eprintln!("the blank window could not start: {error}");
        std::process::exit(1);
    }
}
