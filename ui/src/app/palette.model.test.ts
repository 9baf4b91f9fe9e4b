import { describe, expect, it } from "vitest";
import { PaletteModel, filterCommands, type PaletteCommand } from "./palette.model.svelte";

const ran: string[] = [];
const command = (id: string, label: string, group: PaletteCommand["group"] = "Go to"): PaletteCommand => ({
  id,
  label,
  group,
  run: () => ran.push(id),
});

const commands = [
  command("rooms", "Rooms"),
  command("pings", "Pings"),
  command("room:parser", "parser", "Room"),
  command("room:review", "security review", "Room"),
  command("new-room", "New room", "Action"),
];

describe("command palette", () => {
  it("keeps every command whose label holds every word typed", () => {
    expect(filterCommands(commands, "room").map((c) => c.id)).toEqual(["rooms", "room:parser", "room:review", "new-room"]);
    expect(filterCommands(commands, "sec rev").map((c) => c.id)).toEqual(["room:review"]);
    expect(filterCommands(commands, "zzz")).toEqual([]);
  });

  it("ranks word starts above matches inside a word", () => {
    expect(filterCommands(commands, "view").map((c) => c.id)).toEqual(["room:review"]);
    expect(filterCommands(commands, "p")[0]?.id).toBe("pings");
  });

  it("moves with arrows, runs with Enter, closes on Escape", () => {
    const palette = new PaletteModel(() => commands);
    palette.show();
    palette.type("room");
    expect(palette.handleKey("ArrowDown")).toBe(true);
    expect(palette.activeIndex).toBe(1);
    palette.handleKey("ArrowUp");
    palette.handleKey("ArrowUp");
    expect(palette.activeIndex).toBe(3);
    palette.handleKey("Enter");
    expect(ran.at(-1)).toBe("new-room");
    expect(palette.open).toBe(false);
    palette.show();
    expect(palette.query).toBe("");
    palette.handleKey("Escape");
    expect(palette.open).toBe(false);
  });
});
