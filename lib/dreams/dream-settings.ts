import type { DbClient } from "@/lib/db/database.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import type { DreamConfig } from "./dream-config.ts";

/**
 * What a hub's dream runs follow: the hub's own switches (PATCH /v1/hubs/{id} `settings`; Memax's SDK
 * moved them there from the account's settings) and its owner's tuning (GET/PATCH /v1/settings: excluded
 * kinds, similarity threshold, staleness days). The owner's, not the member's who triggers: the hub is
 * theirs, and two admins with opposite settings would otherwise get opposite runs of one hub.
 */
export interface HubDreamSettings {
  /** false: the schedule leaves the hub alone (a member's trigger still runs it). */
  enabled: boolean;
  merge: boolean;
  archive: boolean;
  organize: boolean;
  excludedKinds: string[];
  /** Null: the install's own. */
  similarityThreshold: number | null;
  stalenessDays: number | null;
}

/**
 * The effective value of one switch in SQL over `hubs h`: the hub's own when it holds a boolean, else
 * on. dueHubs filters by it; hubDreamSettings reads the same.
 */
export function switchSql(key: "dreams_enabled" | "dreams_merge_enabled" | "dreams_archive_enabled" | "dreams_organize_enabled"): Prisma.Sql {
  return Prisma.sql`coalesce(CASE WHEN jsonb_typeof(h.settings -> ${key}::text) = 'boolean' THEN (h.settings ->> ${key}::text)::boolean END, true)`;
}

export async function hubDreamSettings(db: DbClient, hubId: string): Promise<HubDreamSettings> {
  const [row] = await db.$queryRaw<
    { enabled: boolean; merge: boolean; archive: boolean; organize: boolean; excludedKinds: string[] | null; similarityThreshold: number | null; stalenessDays: number | null }[]
  >`SELECT ${switchSql("dreams_enabled")} AS enabled, ${switchSql("dreams_merge_enabled")} AS merge,
           ${switchSql("dreams_archive_enabled")} AS archive, ${switchSql("dreams_organize_enabled")} AS organize,
           s.dreams_excluded_kinds AS "excludedKinds", s.dreams_similarity_threshold AS "similarityThreshold", s.dreams_staleness_days AS "stalenessDays"
      FROM hubs h LEFT JOIN user_settings s ON s.user_id = h.owner_id WHERE h.id = ${hubId}::uuid`;
  return {
    enabled: row?.enabled ?? true,
    merge: row?.merge ?? true,
    archive: row?.archive ?? true,
    organize: row?.organize ?? true,
    excludedKinds: row?.excludedKinds ?? [],
    similarityThreshold: row?.similarityThreshold ?? null,
    stalenessDays: row?.stalenessDays ?? null,
  };
}

/**
 * The run's config under those settings. A scheduled run (no member asked for it) of a hub whose
 * dreams are off takes no step: it was queued before the switch, or by a worker that read it before.
 */
export function withDreamSettings(config: DreamConfig, settings: HubDreamSettings, scheduled: boolean): DreamConfig {
  const on = settings.enabled || !scheduled;
  return {
    ...config,
    duplicateCosine: settings.similarityThreshold ?? config.duplicateCosine,
    staleDays: settings.stalenessDays ?? config.staleDays,
    mergeEnabled: config.mergeEnabled && on && settings.merge,
    archiveEnabled: config.archiveEnabled && on && settings.archive,
    organizeEnabled: config.organizeEnabled && on && settings.organize,
    excludedKinds: [...new Set([...config.excludedKinds, ...settings.excludedKinds])],
  };
}
