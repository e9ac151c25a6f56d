import type { ChecklistItem, ChecklistPayload } from "@/lib/onboarding/onboarding-items.ts";

/** Items this one waits for that are not done yet. */
export function pendingLocks(payload: ChecklistPayload, item: ChecklistItem): string[] {
  const done = new Set(payload.items.filter((i) => i.completed_at).map((i) => i.id));
  return (item.locked_by ?? []).filter((id) => !done.has(id));
}

/** Every required item (all items when none are named) is done. */
export function checklistComplete(payload: ChecklistPayload): boolean {
  const required = payload.required_ids ?? payload.items.map((i) => i.id);
  const done = new Set(payload.items.filter((i) => i.completed_at).map((i) => i.id));
  return required.every((id) => done.has(id));
}

/**
 * Marks the items in `ids` done (and seen) at `now`, each only once its locks are done, repeating
 * so an item unlocked by another in the same call is done too. Returns whether anything changed.
 */
export function completeItems(payload: ChecklistPayload, ids: Iterable<string>, now: Date): boolean {
  const wanted = new Set(ids);
  let changed = false;
  for (let progress = true; progress; ) {
    progress = false;
    for (const item of payload.items) {
      if (!wanted.has(item.id) || item.completed_at || pendingLocks(payload, item).length) continue;
      item.completed_at = now.toISOString();
      item.viewed_at ??= item.completed_at;
      if (item.progress) item.progress = { ...item.progress, current: item.progress.target };
      progress = changed = true;
    }
  }
  return changed;
}
