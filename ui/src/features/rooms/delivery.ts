/** Words and icons for where a message, and each agent it mentions, stands. */
import type { MentionState, MessageView } from "../../bindings";
import type { StatusLabel } from "../../app/status";

export const MENTION_STATES: Record<MentionState, StatusLabel> = {
  queued: { icon: "◌", label: "queued", tone: "neutral" },
  sent: { icon: "→", label: "sent", tone: "neutral" },
  delivered: { icon: "✓", label: "delivered", tone: "progress" },
  working: { icon: "⚙", label: "working", tone: "progress" },
  waiting_human: { icon: "!", label: "waiting for a person", tone: "attention" },
  done: { icon: "✔", label: "done", tone: "ok" },
  failed: { icon: "✕", label: "failed", tone: "bad" },
};

/** How one of my messages stands, or null when it is simply stored. */
export function myMessageStatus(
  message: Pick<MessageView, "delivery" | "error">,
  local: { state: "sending" | "failed"; error: string | null } | null,
): StatusLabel & { detail: string | null } | null {
  if (local?.state === "sending") return { icon: "◌", label: "sending", tone: "neutral", detail: null };
  if (local?.state === "failed") return { icon: "⚠", label: "not sent", tone: "bad", detail: local.error };
  if (message.delivery === "queued") {
    return { icon: "◌", label: "queued", tone: "neutral", detail: "Will be sent when the hub is reachable." };
  }
  if (message.delivery === "failed") return { icon: "⚠", label: "failed", tone: "bad", detail: message.error };
  return null;
}
