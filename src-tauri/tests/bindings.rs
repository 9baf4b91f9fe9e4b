//! `ui/src/bindings.ts` is what the Rust side generates: the window and the shell cannot
//! drift apart. `UPDATE_BINDINGS=1 cargo test -p roundtable-desktop --test bindings` writes
//! it anew after a change of a command or a type.

use std::path::Path;

#[test]
fn the_uis_bindings_are_what_the_commands_generate() {
    let committed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(roundtable_desktop::bindings::BINDINGS);
    let generated_at = tempfile::tempdir().unwrap();
    let generated_path = generated_at.path().join("bindings.ts");
    roundtable_desktop::bindings::builder()
        .export(roundtable_desktop::bindings::typescript(), &generated_path)
        .expect("the commands' types export to TypeScript");
    let generated = std::fs::read_to_string(&generated_path).unwrap();
    if std::env::var_os("UPDATE_BINDINGS").is_some() {
        std::fs::write(&committed, &generated).unwrap();
        return;
    }
    let committed_text = std::fs::read_to_string(&committed).unwrap_or_default();
    assert!(
        committed_text == generated,
        "{} is not what the commands generate: run `UPDATE_BINDINGS=1 cargo test -p roundtable-desktop --test bindings`, then fix the UI where its types changed",
        committed.display()
    );
}
