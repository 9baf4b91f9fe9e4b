/**
 * A state as people read it. Status is never colour alone: every state has words (which a
 * screen reader speaks), an icon that only helps the eye, and a tone the theme may colour.
 */
export type StatusLabel = { icon: string; label: string; tone: "neutral" | "progress" | "attention" | "ok" | "bad" };
