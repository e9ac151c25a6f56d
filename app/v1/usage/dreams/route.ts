import { z } from "zod";
import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getDreamUsage } from "@/lib/dreams/dream-usage.ts";

const dreamUsageQuerySchema = z.object({ hub_id: z.string().max(200).optional() });

// GET /v1/usage/dreams — this month's dream runs of a hub, its (unlimited) quota, and whether the caller may trigger one
export const GET = withAuth({ bucket: "light" }, async (ctx, req) => {
  const query = parseQuery(req, dreamUsageQuerySchema);
  return ok(await getDreamUsage(ctx, { hubId: query.hub_id, hubHeader: req.headers.get("x-hub-id") ?? undefined }));
});

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");
