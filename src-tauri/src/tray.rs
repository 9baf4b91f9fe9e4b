//! The tray icon: how many questions wait for the person, and a way back to the window.
//! On Linux the tray shows a label beside the icon (the count) and a menu; clicks on the
//! icon itself never arrive there, so everything is in the menu.

use tauri::menu::{Menu, MenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{AppHandle, Manager, Wry};

const TRAY: &str = "main";

/// The menu entry that says how many questions wait.
struct WaitingItem(MenuItem<Wry>);

/// What the count reads as. Pure.
pub fn waiting_text(count: usize) -> String {
    match count {
        0 => "No questions waiting".to_owned(),
        1 => "1 question waits for you".to_owned(),
        n => format!("{n} questions wait for you"),
    }
}

/// Adds the tray icon. A desktop without a tray (no appindicator library) only loses it.
pub fn build(app: &tauri::App) -> tauri::Result<()> {
    let open = MenuItem::with_id(app, "open", "Open Roundtable", true, None::<&str>)?;
    let waiting = MenuItem::with_id(app, "pings", waiting_text(0), true, None::<&str>)?;
    let quit = MenuItem::with_id(app, "quit", "Quit", true, None::<&str>)?;
    let menu = Menu::with_items(app, &[&open, &waiting, &quit])?;
    let mut tray = TrayIconBuilder::with_id(TRAY)
        .menu(&menu)
        .tooltip("Roundtable");
    if let Some(icon) = app.default_window_icon() {
        tray = tray.icon(icon.clone());
    }
    tray.on_menu_event(|app, event| match event.id().as_ref() {
        "open" => crate::alerts::open_window(app),
        "pings" => crate::alerts::open_pings(app),
        "quit" => app.exit(0),
        _ => {}
    })
    .build(app)?;
    app.manage(WaitingItem(waiting));
    Ok(())
}

/// Shows how many questions wait.
pub fn show_waiting(app: &AppHandle, count: usize) {
    if let Some(tray) = app.tray_by_id(TRAY) {
        let label = (count > 0).then(|| count.to_string());
        let _ = tray.set_title(label.as_deref());
        let _ = tray.set_tooltip(Some(waiting_text(count)));
    }
    if let Some(item) = app.try_state::<WaitingItem>() {
        let _ = item.0.set_text(waiting_text(count));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_reads_as_words() {
        assert_eq!(waiting_text(0), "No questions waiting");
        assert_eq!(waiting_text(1), "1 question waits for you");
        assert_eq!(waiting_text(3), "3 questions wait for you");
    }
}
