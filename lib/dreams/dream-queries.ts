import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import type { Db } from "@/lib/db/database.ts";
import { membershipOrThrow, readableHubs } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { serializeDreamAction, serializeDreamRun, ZERO_COUNTS, type RunCounts } from "./serialize-dream.ts";

/** Action counts of runs, by run id. */
export async function runCounts(db: Db, runIds: string[]): Promise<Map<string, RunCounts>> {
  const out = new Map<string, RunCounts>();
  if (runIds.length === 0) return out;
  const groups = await db.dreamAction.groupBy({ by: ["runId", "actionType", "createdTopic"], where: { runId: { in: runIds } }, _count: { _all: true } });
  for (const g of groups) {
    const c = { ...(out.get(g.runId) ?? ZERO_COUNTS) };
    const n = g._count._all;
    if (g.actionType === "merge") c.merged += n;
    else if (g.actionType === "contradiction") c.contradictions += n;
    else if (g.actionType === "archive") c.archived += n;
    else if (g.actionType === "organize") {
      c.organized += n;
      if (g.createdTopic) c.topicsCreated += n;
    }
    out.set(g.runId, c);
  }
  return out;
}

const runPosition = z.tuple([z.iso.datetime(), z.uuid()]);

/** GET /v1/dreams: runs of every hub the caller reads (or one), newest first. */
export async function listDreamRuns(ctx: AuthContext, query: { hub_id?: string; limit?: string; cursor?: string }) {
  const limit = parseLimit(query.limit);
  const hubIds = query.hub_id ? [(await membershipOrThrow(ctx, query.hub_id)).hub.id] : (await readableHubs(ctx)).map((m) => m.hub.id);
  const secret = await serverSecret(ctx.db);
  const list = `dreams:${query.hub_id ?? "all"}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, runPosition) : undefined;
  const rows = await ctx.db.dreamRun.findMany({
    where: { hubId: { in: hubIds }, ...(after && { OR: [{ createdAt: { lt: new Date(after[0]) } }, { createdAt: new Date(after[0]), id: { lt: after[1] } }] }) },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: limit + 1,
  });
  const result = page("runs", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, [last.createdAt.toISOString(), last.id]));
  const counts = await runCounts(ctx.db, result.runs.map((r) => r.id));
  return { ...result, runs: result.runs.map((r) => serializeDreamRun(r, counts.get(r.id) ?? ZERO_COUNTS)) };
}

/** A run in a hub the caller reads; anything else is not found. */
export async function dreamRunOrThrow(ctx: AuthContext, runId: string) {
  const run = isUuid(runId) ? await ctx.db.dreamRun.findUnique({ where: { id: runId } }) : null;
  if (!run) throw new ApiError("not_found", "Dream run not found");
  await membershipOrThrow(ctx, run.hubId).catch(() => {
    throw new ApiError("not_found", "Dream run not found");
  });
  return run;
}

/** GET /v1/dreams/:id */
export async function getDreamRun(ctx: AuthContext, runId: string) {
  const run = await dreamRunOrThrow(ctx, runId);
  const counts = await runCounts(ctx.db, [run.id]);
  return serializeDreamRun(run, counts.get(run.id) ?? ZERO_COUNTS);
}

const actionPosition = z.tuple([z.iso.datetime(), z.uuid()]);

/** GET /v1/dreams/:id/actions: everything the run did, in order (type and state narrow). */
export async function listDreamActions(ctx: AuthContext, runId: string, query: { limit?: string; cursor?: string; type?: string; state?: string }) {
  const run = await dreamRunOrThrow(ctx, runId);
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const list = `dream-actions:${run.id}:${query.type ?? ""}:${query.state ?? ""}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, actionPosition) : undefined;
  const rows = await ctx.db.dreamAction.findMany({
    where: {
      runId: run.id,
      ...(query.type && { actionType: query.type }),
      ...(query.state && { state: query.state }),
      ...(after && { OR: [{ createdAt: { gt: new Date(after[0]) } }, { createdAt: new Date(after[0]), id: { gt: after[1] } }] }),
    },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    take: limit + 1,
  });
  const result = page("actions", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, [last.createdAt.toISOString(), last.id]));
  return { ...result, actions: result.actions.map(serializeDreamAction) };
}

/** Actions shown with a report: the first of the run, the rest through /v1/dreams/:id/actions. */
const REPORT_ACTIONS = 100;

/** GET /v1/dreams/report: the hub's latest run with its first actions and what waits for review. */
export async function dreamReport(ctx: AuthContext, hubId: string) {
  const run = await ctx.db.dreamRun.findFirst({ where: { hubId }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] });
  const pending = await ctx.db.dreamAction.count({ where: { hubId, actionType: "contradiction", state: "pending_review" } });
  const pendingReview = { contradictions: pending, topic_merges: 0, topic_restructures: 0, total: pending };
  if (!run) return { has_run: false, message: "No dream runs yet for this hub.", intelligence: { pending_review: pendingReview } };
  const counts = (await runCounts(ctx.db, [run.id])).get(run.id) ?? ZERO_COUNTS;
  const actions = await ctx.db.dreamAction.findMany({ where: { runId: run.id }, orderBy: [{ createdAt: "asc" }, { id: "asc" }], take: REPORT_ACTIONS });
  return {
    has_run: true,
    run: serializeDreamRun(run, counts),
    actions: actions.map(serializeDreamAction),
    intelligence: {
      latest_run: { merged: counts.merged, contradictions_found: counts.contradictions, archived: counts.archived, organized: counts.organized, restructured: 0 },
      pending_review: pendingReview,
    },
  };
}
