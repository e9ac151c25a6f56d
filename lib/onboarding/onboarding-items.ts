/**
 * The getting-started checklist (Memax's onboarding `checklist` notification). Each item has a
 * trigger, a fact about the account that completes it by itself (refresh-onboarding.ts checks
 * them); a person may also tick any item off. The checklist resolves itself (applied_auto) once
 * every required item is done.
 */
export const ONBOARDING_SOURCE = "onboarding";
export const CHECKLIST_KIND = "checklist";
export const DIGEST_KIND = "digest";

/** What completes an item by itself: memories owned, recalls made, an agent connected, an invite sent. */
export type Trigger = { kind: "memories"; atLeast: number } | { kind: "recalls"; atLeast: number } | { kind: "agent" } | { kind: "invite" };

export interface ChecklistItemSpec {
  id: string;
  title: string;
  description: string;
  icon: string;
  cta_url: string;
  cta_label: string;
  trigger: Trigger;
  locked_by?: string[];
}

export const ONBOARDING_ITEMS: ChecklistItemSpec[] = [
  {
    id: "first_memory",
    title: "Save your first memory",
    description: "Push a note from the dashboard, the CLI or an agent.",
    icon: "📝",
    cta_url: "/memories",
    cta_label: "Add a memory",
    trigger: { kind: "memories", atLeast: 1 },
  },
  {
    id: "connect_agent",
    title: "Connect an agent",
    description: "Create an API key for an agent, sync its configs, or sign an MCP client in.",
    icon: "🤖",
    cta_url: "/api-keys",
    cta_label: "Create a key",
    trigger: { kind: "agent" },
  },
  {
    id: "first_recall",
    title: "Recall something",
    description: "Ask in your own words; Engram finds the memories that answer.",
    icon: "🔎",
    cta_url: "/memories",
    cta_label: "Recall",
    trigger: { kind: "recalls", atLeast: 1 },
  },
  {
    id: "five_memories",
    title: "Save five memories",
    description: "Recall gets useful once it has a few memories to choose from.",
    icon: "📚",
    cta_url: "/memories",
    cta_label: "Add memories",
    trigger: { kind: "memories", atLeast: 5 },
    locked_by: ["first_memory"],
  },
  {
    id: "invite_teammate",
    title: "Invite a teammate",
    description: "Share a team hub with someone (optional).",
    icon: "👥",
    cta_url: "/hubs",
    cta_label: "Open hubs",
    trigger: { kind: "invite" },
  },
];

export const ONBOARDING_REQUIRED = ["first_memory", "connect_agent", "first_recall", "five_memories"];

/** Memax's ChecklistItem as stored in the payload. */
export interface ChecklistItem {
  id: string;
  title: string;
  description?: string;
  icon?: string;
  cta_url?: string;
  cta_label?: string;
  viewed_at?: string;
  completed_at?: string;
  locked_by?: string[];
  progress?: { current: number; target: number };
}

export interface ChecklistPayload {
  title: string;
  description?: string;
  items: ChecklistItem[];
  required_ids?: string[];
  collapse_hint?: string;
  pin_context?: string;
  pin_scope_hub_kind?: string;
  /** Which restart this is (1 for the first checklist). */
  version?: number;
}

/** A fresh checklist, version `version`, nothing done yet. */
export function onboardingPayload(version: number): ChecklistPayload {
  return {
    title: "Get started with Engram",
    description: "Four steps to an assistant that remembers.",
    items: ONBOARDING_ITEMS.map(({ trigger, ...item }) => ({
      ...item,
      ...(trigger.kind === "memories" && trigger.atLeast > 1 && { progress: { current: 0, target: trigger.atLeast } }),
    })),
    required_ids: ONBOARDING_REQUIRED,
    collapse_hint: "Getting started",
    pin_context: "memories_hero",
    pin_scope_hub_kind: "personal",
    version,
  };
}
