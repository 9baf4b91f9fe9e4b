/**
 * The command palette (Ctrl/Cmd+K): one text box that reaches every view, room and action.
 * Matching is plain and predictable — every word typed must appear in the label, and labels
 * where a word starts a word rank first — so the same keys always find the same thing.
 */

export type PaletteGroup = "Go to" | "Room" | "Question" | "Action";

export type PaletteCommand = {
  id: string;
  label: string;
  group: PaletteGroup;
  /** Shown on the right, e.g. a shortcut or an unread count. */
  hint?: string;
  run: () => void;
};

export function filterCommands(commands: readonly PaletteCommand[], query: string, limit = 20): PaletteCommand[] {
  const words = query.toLowerCase().split(/\s+/).filter((word) => word !== "");
  if (words.length === 0) return commands.slice(0, limit);
  const scored: { command: PaletteCommand; score: number; index: number }[] = [];
  commands.forEach((command, index) => {
    const label = `${command.group} ${command.label}`.toLowerCase();
    let score = 0;
    for (const word of words) {
      const at = label.indexOf(word);
      if (at === -1) return;
      const startsWord = at === 0 || /[\s/:·-]/.test(label[at - 1]!);
      score += startsWord ? 2 : 1;
    }
    scored.push({ command, score, index });
  });
  scored.sort((a, b) => b.score - a.score || a.index - b.index);
  return scored.slice(0, limit).map((entry) => entry.command);
}

export class PaletteModel {
  open = $state(false);
  query = $state("");
  activeIndex = $state(0);

  private readonly commands: () => readonly PaletteCommand[];

  constructor(commands: () => readonly PaletteCommand[]) {
    this.commands = commands;
  }

  readonly results: PaletteCommand[] = $derived.by(() => filterCommands(this.commands(), this.query));

  show(): void {
    this.open = true;
    this.query = "";
    this.activeIndex = 0;
  }

  close(): void {
    this.open = false;
  }

  type(query: string): void {
    this.query = query;
    this.activeIndex = 0;
  }

  move(delta: number): void {
    const count = this.results.length;
    if (count === 0) return;
    this.activeIndex = (this.activeIndex + delta + count) % count;
  }

  run(index: number = this.activeIndex): void {
    const command = this.results[index];
    if (!command) return;
    this.close();
    command.run();
  }

  /** Returns true when the key was the palette's to handle. */
  handleKey(key: string): boolean {
    switch (key) {
      case "ArrowDown":
        this.move(1);
        return true;
      case "ArrowUp":
        this.move(-1);
        return true;
      case "Enter":
        this.run();
        return true;
      case "Escape":
        this.close();
        return true;
      default:
        return false;
    }
  }
}
