import { planLimits, SELF_HOSTED_PLAN, SELF_HOSTED_PLAN_NAME } from "./plan-limits.ts";

/** The team-hub counterpart of SELF_HOSTED_PLAN: what a team hub may hold on this install. */
export const SELF_HOSTED_HUB_PLAN = "self_hosted_team";
/** When these definitions were written; they change only with Engram's code or its environment. */
const DEFINED_AT = "2026-11-27T00:00:00.000Z";

/**
 * GET /v1/plans (Memax's PlanDefinition[]): a self-hosted install has one plan for people and one for
 * team hubs, free, holding exactly the limits this server enforces (the same as GET /v1/usage shows).
 */
export function listPlans() {
  return (["user", "hub"] as const).map((scope) => {
    const { max_topics_per_hub, max_active_invites_per_hub, max_memory_content_bytes, max_hub_members, max_team_hubs, config_bytes_limit, ...limits } = planLimits(scope);
    return {
      id: scope === "user" ? SELF_HOSTED_PLAN : SELF_HOSTED_HUB_PLAN,
      scope: scope === "user" ? ("personal" as const) : ("hub" as const),
      display_name: scope === "user" ? SELF_HOSTED_PLAN_NAME : `${SELF_HOSTED_PLAN_NAME} team hub`,
      tier_order: 0,
      entitlement_rank: 0,
      monthly_price_cents: 0,
      ...limits,
      max_team_hubs,
      max_owned_free_team_hubs: max_team_hubs,
      // null is Memax's "no member cap".
      max_hub_members: max_hub_members === -1 ? null : max_hub_members,
      seat_minimum: 0,
      seat_billed: false,
      // Limits Memax's PlanDefinition has no field for live in its features.
      features: { max_topics_per_hub, max_active_invites_per_hub, max_memory_content_bytes, ...(scope === "user" && { config_bytes_limit }), self_hosted: true },
      active: true,
      created_at: DEFINED_AT,
      updated_at: DEFINED_AT,
    };
  });
}
