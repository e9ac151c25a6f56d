/** Kinds that need a decision (resolved through /resolve with an action); the rest are receipts (seen, dismissed). */
export const DECISION_KINDS = ["hub_invite", "hub_ownership_transfer", "review_contradiction", "decision_gate", "checklist"] as const;
export const RECEIPT_KINDS = ["hub_member_joined", "hub_ownership_transferred", "memory_processing_failed", "dream_run_completed"] as const;
export const NOTIFICATION_KINDS = [...DECISION_KINDS, ...RECEIPT_KINDS] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number] | (string & {});

export const NOTIFICATION_STATUSES = ["pending", "resolved", "dismissed", "expired"] as const;
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number];

/**
 * Actions /resolve accepts per decision kind, and the resolution each records. A decision gate's
 * actions are its own options' ids ("1"…"4", resolution chose_<id>) and dismiss (lib/boards).
 */
export const RESOLVE_ACTIONS: Record<string, Record<string, string>> = {
  hub_invite: { accept: "accepted", decline: "declined" },
  hub_ownership_transfer: { accept: "accepted", decline: "declined", dismiss: "dismissed" },
  review_contradiction: { keep_a: "kept_a", keep_b: "kept_b", keep_both: "kept_both", dismiss: "dismissed" },
  // A checklist leaves pending when dismissed, or by itself (applied_auto) when its required items are done.
  checklist: { dismiss: "dismissed" },
};

export function isDecisionKind(kind: string): boolean {
  return (DECISION_KINDS as readonly string[]).includes(kind);
}
