//! Roundtable's desktop app: a Tauri 2 shell over the core.
//!
//! The shell holds no logic of its own: [`commands`] are a few lines each over the core,
//! [`alerts`] turns the core's changes into window events, tray counts and notifications,
//! [`home`] decides which hub to talk to (the app's own, embedded, by default),
//! [`desktop`] keeps the one running session and [`memory`] gives back what bursts of work
//! freed. The window is `ui/`, which talks to this only through the generated [`bindings`].

use std::sync::OnceLock;

use tauri::Manager;
use tauri_plugin_deep_link::DeepLinkExt;

pub mod alerts;
pub mod bindings;
pub mod commands;
pub mod desktop;
pub mod home;
pub mod memory;
pub mod notice;
pub mod tray;

use alerts::OpenTarget;

/// When the process started (ms since the epoch), for timing the first paint.
pub static STARTED_AT_MS: OnceLock<f64> = OnceLock::new();

/// Where the window goes first (the link the app was started with), taken once.
pub struct StartTarget(pub std::sync::Mutex<Option<OpenTarget>>);

/// Where a `roundtable://` link sends the window. Pure.
pub fn link_target(link: &str) -> Option<OpenTarget> {
    let url = url::Url::parse(link.trim()).ok()?;
    if url.scheme() != "roundtable" || url.host_str() != Some("invite") {
        return None;
    }
    let code = url.path().trim_start_matches('/');
    let code = roundtable_core::screens::invite_code(code).ok()?.to_owned();
    let hub = url
        .query_pairs()
        .find(|(key, _)| key == "hub")
        .map(|(_, hub)| hub.into_owned());
    Some(OpenTarget::Redeem { code, hub })
}

fn open_links(app: &tauri::AppHandle, links: impl IntoIterator<Item = String>) {
    for link in links {
        match link_target(&link) {
            Some(target) => alerts::open(app, target),
            None => tracing::warn!("ignoring a link Roundtable does not know"),
        }
    }
}

/// The environment variable that makes WebKitGTK (2.46 and later) paint with Skia on the
/// CPU instead of through OpenGL.
pub const CPU_RENDERING: &str = "WEBKIT_SKIA_ENABLE_CPU_RENDERING";

/// Paints the window on the CPU unless the person chose otherwise (by setting
/// [`CPU_RENDERING`] themselves, to `0` for the GPU). The window is text, lists and small
/// SVGs: where GL is Mesa's software renderer (virtual machines, remote desktops, machines
/// without a GPU driver), Skia's CPU raster paints it with fewer dropped frames than OpenGL
/// does, and OpenGL keeps glyph and path caches in the web process — about 40 MiB more at
/// idle — as measured in `docs/benchmarks.md`. Only painting moves: the painted tiles
/// are still composited through OpenGL.
///
/// Call it first thing in `main`, before any thread starts: it sets an environment variable.
pub fn choose_rendering() {
    set_unless_chosen(CPU_RENDERING, "1");
}

/// Sets `name` to `value` unless the person set it.
fn set_unless_chosen(name: &str, value: &str) {
    if cfg!(target_os = "linux") && std::env::var_os(name).is_none() {
        // SAFETY: called at the top of `main`, before the process starts a thread, so no
        // other thread can be reading the environment.
        #[allow(unsafe_code, reason = "setting a variable before any thread exists")]
        unsafe {
            std::env::set_var(name, value);
        }
    }
}

/// Runs the app until it quits.
pub fn run() {
    let _ = STARTED_AT_MS.set(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64() * 1e3),
    );
    let places = home::Places::from_env();
    let bindings = bindings::builder();
    let result = tauri::Builder::default()
        // First: a second launch (say, of a link) goes to the running app, then exits.
        .plugin(tauri_plugin_single_instance::init(|app, _argv, _cwd| {
            alerts::open_window(app);
        }))
        .plugin(tauri_plugin_deep_link::init())
        .plugin(
            tauri_plugin_log::Builder::new()
                .clear_targets()
                .target(tauri_plugin_log::Target::new(
                    tauri_plugin_log::TargetKind::Stderr,
                ))
                .target(tauri_plugin_log::Target::new(
                    tauri_plugin_log::TargetKind::Folder {
                        path: places.logs.clone(),
                        file_name: Some("desktop".into()),
                    },
                ))
                .max_file_size(5 * 1024 * 1024)
                .rotation_strategy(tauri_plugin_log::RotationStrategy::KeepSome(5))
                .level(log::LevelFilter::Info)
                .build(),
        )
        .invoke_handler(bindings.invoke_handler())
        .setup(move |app| {
            bindings.mount_events(app);
            let desktop = desktop::Desktop::start(app.handle().clone(), places);
            app.manage(desktop);
            app.manage(memory::Trimmer::start(memory::EVERY));
            if let Err(error) = tray::build(app) {
                tracing::warn!(%error, "no tray icon");
            }
            #[cfg(any(target_os = "linux", windows))]
            if let Err(error) = app.deep_link().register_all() {
                tracing::info!(%error, "roundtable:// links are not registered with the desktop");
            }
            let handle = app.handle().clone();
            app.deep_link().on_open_url(move |event| {
                open_links(&handle, event.urls().into_iter().map(String::from));
            });
            // The link the app was started with: the window asks for it once it listens.
            let start = app
                .deep_link()
                .get_current()
                .ok()
                .flatten()
                .and_then(|urls| urls.iter().find_map(|url| link_target(url.as_str())));
            app.manage(StartTarget(std::sync::Mutex::new(start)));
            Ok(())
        })
        .run(tauri::generate_context!());
    if let Err(error) = result {
        #[cfg(target_os = "linux")]
        start_again_after_a_quitting_instance(&error);
        eprintln!("Roundtable could not start: {error}");
        std::process::exit(1);
    }
}

/// Set in the environment of a launch started again by
/// [`start_again_after_a_quitting_instance`]: it is not started a third time.
#[cfg(target_os = "linux")]
const STARTED_AGAIN: &str = "ROUNDTABLE_STARTED_AGAIN";

/// A launch that raced an instance quitting (on Linux, where the instance is found by its
/// name on the session bus): the single-instance plugin found the name taken and handed the
/// instance this launch's arguments, and the instance left without answering. Nothing of
/// this process has started (the plugin is set up first), so it starts again, once, as the
/// same program with the same arguments: now it is the instance, or it hands its arguments
/// to the one that started meanwhile. Returns only if it does not start again.
#[cfg(target_os = "linux")]
fn start_again_after_a_quitting_instance(error: &tauri::Error) {
    use std::os::unix::process::CommandExt;
    // The plugin's error names no kind: its words are what tell this failure.
    let forwarding = error
        .to_string()
        .contains("failed to forward arguments to the running instance");
    if !forwarding || std::env::var_os(STARTED_AGAIN).is_some() {
        return;
    }
    let Ok(program) = std::env::current_exe() else {
        return;
    };
    eprintln!("Roundtable's running instance quit as this one started ({error}); starting again");
    // The bus takes a moment to let the name go.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let failed = std::process::Command::new(program)
        .args(std::env::args_os().skip(1))
        .env(STARTED_AGAIN, "1")
        .exec();
    eprintln!("Roundtable could not start again: {failed}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invite_links_open_the_redeem_form_and_other_links_nothing() {
        assert_eq!(
            link_target("roundtable://invite/abc123?hub=127.0.0.1:4000"),
            Some(OpenTarget::Redeem {
                code: "abc123".into(),
                hub: Some("127.0.0.1:4000".into())
            })
        );
        assert_eq!(
            link_target("roundtable://invite/abc123"),
            Some(OpenTarget::Redeem {
                code: "abc123".into(),
                hub: None
            })
        );
        for other in [
            "roundtable://room/r1",
            "https://invite/abc",
            "roundtable://invite/",
            "roundtable://invite/a%20b",
            "not a link",
        ] {
            assert_eq!(link_target(other), None, "{other}");
        }
    }
}
