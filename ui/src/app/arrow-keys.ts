/**
 * Arrow-key movement within a list, as a Svelte attachment: `{@attach arrowKeys()}` on the
 * container. Up/Down (or Left/Right with `horizontal`) move focus between the descendants
 * marked `data-arrow-item`, Home/End jump to the ends. Tab still leaves the list, so the
 * list is one stop in the page's focus order rather than a trap.
 */
import type { Attachment } from "svelte/attachments";

export function arrowKeys(options: { horizontal?: boolean } = {}): Attachment<HTMLElement> {
  const previous = options.horizontal ? "ArrowLeft" : "ArrowUp";
  const next = options.horizontal ? "ArrowRight" : "ArrowDown";
  return (container) => {
    const onKeydown = (event: KeyboardEvent) => {
      if (![previous, next, "Home", "End"].includes(event.key)) return;
      const target = event.target as HTMLElement | null;
      if (target?.closest("input, textarea, select, [contenteditable]")) return;
      const items = Array.from(container.querySelectorAll<HTMLElement>("[data-arrow-item]")).filter(
        (item) => !item.hasAttribute("disabled"),
      );
      if (items.length === 0) return;
      const current = items.findIndex((item) => item === document.activeElement || item.contains(document.activeElement));
      let index: number;
      if (event.key === "Home") index = 0;
      else if (event.key === "End") index = items.length - 1;
      else if (event.key === next) index = current === -1 ? 0 : Math.min(items.length - 1, current + 1);
      else index = current === -1 ? items.length - 1 : Math.max(0, current - 1);
      event.preventDefault();
      items[index]!.focus();
    };
    container.addEventListener("keydown", onKeydown);
    return () => container.removeEventListener("keydown", onKeydown);
  };
}
