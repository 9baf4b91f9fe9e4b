//! Onboarding an agent CLI in one step, and offboarding it.
//!
//! Onboarding registers the agent at the hub through the person's profile (its token goes
//! to the agent's own 0600 profile), then edits the CLI's configuration files: each file is
//! copied to a backup in the agent's profile first, then replaced whole (a temporary file
//! renamed over it, with its permissions kept), never half-written. What was added is
//! recorded in the agent's profile (`onboarding.json`), so offboarding removes exactly that
//! and keeps whatever else the person changed meanwhile. Onboarding twice changes nothing.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::edits::{self, PlannedFile, Undo, Wiring};
use super::{AgentCli, Environment};
use crate::agents::AgentSettings;
use crate::hook_settings::HookSettings;
use crate::profile::{Profile, profile_name_for};
use crate::{Core, CoreError, now_ms};

const RECORD: &str = "onboarding.json";

/// Checks the name a person gives an agent (its handle's second half, `dana/NAME`), before
/// anything is registered or edited.
pub fn check_agent_name(name: &str) -> Result<(), CoreError> {
    roundtable_protocol::handles::validate_segment(name, "agent name")
        .map_err(|error| CoreError::Invalid(error.to_string()))
}

/// What onboarding did, kept in the agent's profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OnboardRecord {
    pub cli: AgentCli,
    pub handle: String,
    /// The project whose configuration was edited (`None`: the user's own).
    pub project: Option<PathBuf>,
    pub files: Vec<EditedFile>,
    pub at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditedFile {
    pub path: PathBuf,
    /// The file did not exist before onboarding.
    pub created: bool,
    pub backup: Option<PathBuf>,
    pub undo: Vec<Undo>,
}

/// What changed in one file, for a person to read.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct FileChange {
    pub path: PathBuf,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub backup: Option<PathBuf>,
}

/// The result of onboarding or offboarding.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct Report {
    pub cli: AgentCli,
    pub handle: String,
    /// The agent's profile, holding its token.
    pub profile: String,
    /// Nothing needed doing (already onboarded, or not onboarded).
    pub unchanged: bool,
    pub changes: Vec<FileChange>,
}

/// Options of onboarding.
#[derive(Debug, Clone, Default)]
pub struct OnboardOptions {
    /// Edit this project's configuration instead of the user's.
    pub project: Option<PathBuf>,
    pub description: Option<String>,
    pub settings: HookSettings,
    /// The `roundtable` executable the entries run (default: this program).
    pub roundtable: Option<PathBuf>,
    /// Leave the CLI's own task tool as it is (onboarding otherwise turns it on where
    /// today's default models go without one).
    pub no_task_tools: bool,
}

/// Every onboarding record in `profiles`.
pub fn onboarded(profiles: &Path) -> Vec<OnboardRecord> {
    let Ok(entries) = std::fs::read_dir(profiles) else {
        return Vec::new();
    };
    let mut records: Vec<OnboardRecord> = entries
        .flatten()
        .filter_map(|entry| {
            let text = std::fs::read_to_string(entry.path().join(RECORD)).ok()?;
            serde_json::from_str(&text).ok()
        })
        .collect();
    records.sort_by(|a, b| a.handle.cmp(&b.handle));
    records
}

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> CoreError {
    let context = context.into();
    move |source| CoreError::Io { context, source }
}

fn read_text(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| std::io::Error::other("it is not UTF-8 text")),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Refuses a configuration file that is a symbolic link, or (in a project) that lies under
/// a linked directory inside the project: edited through a link, a project's `.mcp.json`
/// pointing at `~/.claude.json` would copy the person's account file into the repository.
fn refuse_links(path: &Path, project: Option<&Path>) -> Result<(), CoreError> {
    let linked = |at: &Path| {
        std::fs::symlink_metadata(at).is_ok_and(|metadata| metadata.file_type().is_symlink())
    };
    let refusal = |at: &Path| {
        let target = std::fs::read_link(at)
            .map(|target| format!(" (to {})", target.display()))
            .unwrap_or_default();
        CoreError::Invalid(format!(
            "{} is a symbolic link{target}; Roundtable does not edit configurations through links. \
             Replace the link with the file itself (or onboard in another place), then onboard again",
            at.display()
        ))
    };
    if linked(path) {
        return Err(refusal(path));
    }
    if let Some(project) = project {
        let mut at = path.parent();
        while let Some(dir) = at {
            if dir == project || !dir.starts_with(project) {
                break;
            }
            if linked(dir) {
                return Err(refusal(dir));
            }
            at = dir.parent();
        }
    }
    Ok(())
}

/// Replaces `path` with `text` whole: a temporary file beside it (made new, never one that
/// was there), synced, renamed over it, with the original's permissions (0600 for a new
/// file).
fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let (temporary, mut file) = {
        let mut attempt = 0;
        loop {
            let temporary = dir.join(format!(
                ".{name}.roundtable-{}",
                crate::random_key(&std::process::id().to_string())
            ));
            match options.open(&temporary) {
                Ok(file) => break (temporary, file),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => {
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
    };
    if let Ok(metadata) = std::fs::metadata(path) {
        file.set_permissions(metadata.permissions())?;
    }
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

/// Copies `path` into the agent profile's `backups/` before it is changed.
fn back_up(profile_dir: &Path, path: &Path, text: &str) -> Result<PathBuf, CoreError> {
    let dir = profile_dir.join("backups");
    crate::profile::create_private_dir(&dir).map_err(io_error("cannot create the backups"))?;
    let name = path
        .to_string_lossy()
        .trim_start_matches('/')
        .replace(['/', '\\'], "_");
    let backup = dir.join(format!("{}-{name}", now_ms()));
    crate::profile::write_private(&backup, text)?;
    Ok(backup)
}

fn write_record(profile_dir: &Path, record: &OnboardRecord) -> Result<(), CoreError> {
    let text = serde_json::to_string_pretty(record).expect("records serialize");
    Ok(crate::profile::write_private(
        &profile_dir.join(RECORD),
        &text,
    )?)
}

impl Core {
    /// Onboards `cli` as agent `<me>/<name>`: registers it (or reuses its profile here),
    /// then wires the CLI's configuration to it. Run on the person's core.
    pub async fn onboard(
        &self,
        env: &Environment,
        cli: AgentCli,
        name: &str,
        options: OnboardOptions,
    ) -> Result<Report, CoreError> {
        if !cli.supported() {
            return Err(CoreError::Invalid(
                edits::EditError::Unsupported(cli).to_string(),
            ));
        }
        check_agent_name(name)?;
        let handle = format!("{}/{name}", self.profile().handle);
        let base = self.profile().base().to_path_buf();
        let project = options.project.clone();
        if let Some(other) = onboarded(&base).into_iter().find(|record| {
            record.cli == cli && record.project == project && record.handle != handle
        }) {
            return Err(CoreError::Invalid(format!(
                "{cli} is already onboarded as {}{}; offboard it first, or onboard this agent in a project (--project)",
                other.handle,
                other
                    .project
                    .map(|p| format!(" in {}", p.display()))
                    .unwrap_or_default()
            )));
        }
        let roundtable = match options.roundtable.clone() {
            Some(path) => path,
            None => std::env::current_exe()
                .map_err(io_error("cannot find the roundtable executable"))?,
        };
        let wiring = Wiring {
            handle: handle.clone(),
            roundtable,
            roundtable_home: std::env::var_os("ROUNDTABLE_HOME").map(PathBuf::from),
            settings: options.settings.clone(),
            task_tools: !options.no_task_tools,
            profiles: std::path::absolute(&base).unwrap_or_else(|_| base.clone()),
            os: roundtable_platform::places::Os::CURRENT,
        };
        // Plan first: a configuration that cannot be parsed, or that is a link, stops
        // everything here.
        for path in env.config_files(cli, project.as_deref()) {
            refuse_links(&path, project.as_deref())?;
        }
        let plan = || {
            edits::plan(env, cli, project.as_deref(), &wiring, read_text)
                .map_err(|error| CoreError::Invalid(error.to_string()))
        };
        let mut planned = plan()?;
        let profile = match Profile::load(&base, &profile_name_for(&handle)) {
            Ok(profile) => profile,
            Err(_) => {
                let settings = AgentSettings {
                    description: options.description.clone().or_else(|| {
                        Some(format!(
                            "{} agent of {}",
                            cli.framework(),
                            self.profile().handle
                        ))
                    }),
                    ..AgentSettings::default()
                };
                self.synced(crate::client::PATIENCE).await?;
                self.register_agent(name, settings, crate::client::PATIENCE)
                    .await?
                    .profile
            }
        };
        options.settings.save(&profile.dir)?;
        let mut record = onboarded(&base)
            .into_iter()
            .find(|record| record.handle == handle && record.cli == cli)
            .unwrap_or(OnboardRecord {
                cli,
                handle: handle.clone(),
                project: project.clone(),
                files: Vec::new(),
                at_ms: now_ms(),
            });
        let mut changes = Vec::new();
        let mut replans = 0;
        'plan: loop {
            for PlannedFile {
                path,
                before,
                after,
                undo,
            } in planned
            {
                // The CLI may have written the file since it was read: then the plan is
                // made again from what is there now (what was written so far is recorded,
                // and planning again finds it done).
                refuse_links(&path, project.as_deref())?;
                let now = read_text(&path)
                    .map_err(io_error(format!("cannot read {}", path.display())))?;
                if now != before {
                    replans += 1;
                    if replans > 3 {
                        return Err(CoreError::Invalid(format!(
                            "{} keeps changing while Roundtable edits it (is the agent CLI running and writing it?); try again",
                            path.display()
                        )));
                    }
                    planned = plan()?;
                    continue 'plan;
                }
                let backup = match &before {
                    Some(text) => Some(back_up(&profile.dir, &path, text)?),
                    None => None,
                };
                replace_file(&path, &after)
                    .map_err(io_error(format!("cannot write {}", path.display())))?;
                let (added, removed) =
                    edits::changed_lines(before.as_deref().unwrap_or(""), &after);
                changes.push(FileChange {
                    path: path.clone(),
                    added,
                    removed,
                    backup: backup.clone(),
                });
                match record.files.iter_mut().find(|file| file.path == path) {
                    Some(file) => file.undo.extend(undo),
                    None => record.files.push(EditedFile {
                        path,
                        created: before.is_none(),
                        backup,
                        undo,
                    }),
                }
                // Recorded after each file, so a crash leaves nothing unrecorded behind.
                write_record(&profile.dir, &record)?;
            }
            break;
        }
        write_record(&profile.dir, &record)?;
        Ok(Report {
            cli,
            handle,
            profile: profile.name,
            unchanged: changes.is_empty(),
            changes,
        })
    }
}

/// Offboards the agent `handle` from `cli`: removes exactly what onboarding added (the
/// person's other changes stay), and forgets the record. The agent stays registered at the
/// hub, with its profile and its messages.
pub fn offboard(profiles: &Path, cli: AgentCli, handle: &str) -> Result<Report, CoreError> {
    let profile_dir = profiles.join(profile_name_for(handle));
    let record = onboarded(profiles)
        .into_iter()
        .find(|record| record.handle == handle && record.cli == cli);
    let Some(record) = record else {
        return Ok(Report {
            cli,
            handle: handle.to_owned(),
            profile: profile_name_for(handle),
            unchanged: true,
            changes: Vec::new(),
        });
    };
    // Every file is undone in memory first: one that no longer parses stops everything.
    let mut undone = Vec::new();
    for file in record.files.iter().rev() {
        refuse_links(&file.path, record.project.as_deref())?;
        let Some(before) = read_text(&file.path)
            .map_err(io_error(format!("cannot read {}", file.path.display())))?
        else {
            continue;
        };
        let after = edits::undo_all(&file.path, &before, &file.undo)
            .map_err(|error| CoreError::Invalid(error.to_string()))?;
        undone.push((file, before, after));
    }
    let mut changes = Vec::new();
    for (file, before, after) in undone {
        if after == before {
            continue;
        }
        let backup = back_up(&profile_dir, &file.path, &before)?;
        if file.created && after.trim().is_empty() {
            std::fs::remove_file(&file.path)
                .map_err(io_error(format!("cannot remove {}", file.path.display())))?;
        } else {
            replace_file(&file.path, &after)
                .map_err(io_error(format!("cannot write {}", file.path.display())))?;
        }
        let (added, removed) = edits::changed_lines(&before, &after);
        changes.push(FileChange {
            path: file.path.clone(),
            added,
            removed,
            backup: Some(backup),
        });
    }
    std::fs::remove_file(profile_dir.join(RECORD))
        .map_err(io_error("cannot forget the onboarding record"))?;
    Ok(Report {
        cli,
        handle: handle.to_owned(),
        profile: profile_name_for(handle),
        unchanged: false,
        changes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window's in-memory backend takes its verdict on agent names from here
    /// (`ui/src/backend/fixtures/agent-names.json`), names as a person might type them.
    #[test]
    fn the_uis_agent_name_verdicts_are_the_cores_own() {
        let longest = "w".repeat(32);
        let too_long = "w".repeat(33);
        let names = [
            "helper",
            "writer",
            "re-view_2",
            "0x",
            &longest,
            "w",
            "",
            &too_long,
            "Bad Name!",
            "Writer",
            "-writer",
            "_writer",
            "re view",
            "dana/writer",
            "naïve",
            "writer.",
        ];
        let cases: Vec<_> = names
            .iter()
            .map(|name| serde_json::json!({ "name": name, "outcome": crate::ui_outcome(check_agent_name(name)) }))
            .collect();
        crate::keep_ui_fixture(
            "agent-names.json",
            &serde_json::json!({ "cases": cases }),
            "agent_name_verdicts",
        );
    }
}
