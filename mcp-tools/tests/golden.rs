//! The tools' list, pinned: what agents read of every tool (names, descriptions, argument
//! schemas), whichever way they reach the hub. A change here is a change agents see.

use std::time::Duration;

use roundtable_mcp_tools::{HubOps, HumanAnswer, OneAgent, Ping, Sent, Shown, ToolError, Tools};
use roundtable_protocol::bodies::{AgentState, ComponentDef, ComponentStatus, Task};
use roundtable_protocol::model::DirectoryEntry;
use serde_json::Value;

/// A hub that refuses everything: the list does not depend on it.
struct Refusing;

fn refused<T>() -> Result<T, ToolError> {
    Err(ToolError::new("refused", "test"))
}

#[async_trait::async_trait]
impl HubOps for Refusing {
    async fn whoami(&self) -> Value {
        Value::Null
    }
    async fn find_agents(
        &self,
        _: Option<String>,
        _: u32,
    ) -> Result<Vec<DirectoryEntry>, ToolError> {
        refused()
    }
    async fn request_contact(&self, _: String, _: Option<String>) -> Result<Shown, ToolError> {
        refused()
    }
    async fn list_rooms(&self) -> Result<Shown, ToolError> {
        refused()
    }
    async fn create_room(
        &self,
        _: String,
        _: Option<String>,
        _: Vec<String>,
    ) -> Result<Shown, ToolError> {
        refused()
    }
    async fn invite(&self, _: &str, _: &str) -> Result<String, ToolError> {
        refused()
    }
    async fn send_message(&self, _: &str, _: Value) -> Result<Sent, ToolError> {
        refused()
    }
    async fn unread_messages(&self, _: Option<&str>) -> Result<Shown, ToolError> {
        refused()
    }
    async fn messages_since(&self, _: &str, _: u64, _: u32) -> Result<Shown, ToolError> {
        refused()
    }
    async fn latest_messages(&self, _: &str, _: u32) -> Result<Shown, ToolError> {
        refused()
    }
    async fn wait_for_messages(&self, _: Duration) -> Result<Vec<Value>, ToolError> {
        refused()
    }
    async fn set_status(
        &self,
        _: AgentState,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Sent, ToolError> {
        refused()
    }
    async fn define_components(&self, _: &str, _: Vec<ComponentDef>) -> Result<Sent, ToolError> {
        refused()
    }
    async fn update_component(
        &self,
        _: &str,
        _: &str,
        _: ComponentStatus,
        _: Option<&str>,
        _: Vec<String>,
    ) -> Result<Sent, ToolError> {
        refused()
    }
    async fn claim_component(
        &self,
        _: &str,
        _: &str,
        _: bool,
        _: Option<&str>,
    ) -> Result<Sent, ToolError> {
        refused()
    }
    async fn report_tasks(&self, _: Vec<Task>, _: Option<&str>) -> Result<Sent, ToolError> {
        refused()
    }
    async fn raise_ping(&self, _: &str, _: &[String], _: Duration) -> Result<Ping, ToolError> {
        refused()
    }
    async fn await_answer(&self, _: &Ping, _: Duration) -> Result<HumanAnswer, ToolError> {
        refused()
    }
    async fn withdraw_ping(&self, _: &Ping, _: &str) -> Result<(), ToolError> {
        refused()
    }
    fn principal(&self) -> String {
        "p_refusing".into()
    }
}

#[test]
fn the_tools_agents_read_are_pinned() {
    let tools = Tools::<OneAgent<Refusing>>::tool_router().list_all();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    // Sorted, so the list is the same on every call and every way.
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    assert_eq!(names.len(), 16, "{names:?}");
    let listed = serde_json::to_string_pretty(&tools).unwrap();
    insta::assert_snapshot!("tools_list", listed);
}

#[test]
fn every_tool_says_what_it_does_and_takes_an_object() {
    for tool in Tools::<OneAgent<Refusing>>::tool_router().list_all() {
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(description.len() > 20, "{}: {description:?}", tool.name);
        assert_eq!(
            tool.input_schema.get("type"),
            Some(&Value::from("object")),
            "{}",
            tool.name
        );
    }
}
