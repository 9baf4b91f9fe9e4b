// No console window on Windows in release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    // First, while the process has one thread: the web process inherits it.
    roundtable_desktop::choose_rendering();
    roundtable_desktop::run();
}
