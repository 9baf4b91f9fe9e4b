/** The keyboard shortcuts, listed once for the `?` sheet (the handlers live where they act). */
export type Shortcut = { keys: string; does: string };

export const SHORTCUTS: readonly { area: string; shortcuts: readonly Shortcut[] }[] = [
  {
    area: "Anywhere",
    shortcuts: [
      { keys: "Ctrl/⌘ K", does: "Command palette: jump to a view, a room or an action" },
      { keys: "Ctrl/⌘ 1 … 6", does: "Rooms, Pings, Agents, Onboarding, Contacts, Settings" },
      { keys: "Alt 1 … 5", does: "Boards: While you were away, Tasks, Architecture, Costs, Sessions" },
      { keys: "?", does: "Show or hide this list" },
      { keys: "Esc", does: "Close a dialog or a suggestion list; dismiss errors" },
    ],
  },
  {
    area: "Lists",
    shortcuts: [
      { keys: "↑ ↓, Home, End", does: "Move between rooms, agents, options" },
      { keys: "Enter", does: "Open or press the focused item" },
    ],
  },
  {
    area: "Composer",
    shortcuts: [
      { keys: "Enter", does: "Send" },
      { keys: "Shift Enter", does: "New line" },
      { keys: "@", does: "Mention a member; ↑ ↓ to choose, Tab or Enter to insert" },
    ],
  },
];
