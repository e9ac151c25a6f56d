import { ok } from "@/lib/api/envelope.ts";
import { z } from "zod";
import { cursorSchema } from "@/lib/api/pagination.ts";
import { parseWith, queryParams } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listNotifications } from "@/lib/notifications/list-notifications.ts";

// GET /v1/notifications — the caller's notifications, newest first (?hub, status, kind and resolution (repeatable), unseen_only, since, limit, cursor);
// Next runs this for HEAD too, which refreshes no checklist
export const GET = withAuth({}, async (ctx, req) => {
  const q = queryParams(req, ["hub", "hub_id", "status", "kind", "resolution", "unseen_only", "since", "limit", "cursor"]);
  const repeated = (name: string) => q.getAll(name).flatMap((k) => k.split(",")).map((k) => k.trim()).filter(Boolean);
  const kinds = repeated("kind");
  return ok(
    await listNotifications(
      ctx,
      {
        hub: q.get("hub") || q.get("hub_id") || undefined,
        status: q.get("status") || undefined,
        kinds,
        resolutions: repeated("resolution"),
        unseenOnly: q.get("unseen_only") === "true" || q.get("unseen_only") === "1",
        since: q.get("since") || undefined,
        limit: q.get("limit"),
        cursor: parseWith(z.object({ cursor: cursorSchema.optional() }), { cursor: q.get("cursor") || undefined }, "Query is invalid").cursor,
      },
      { refresh: req.method !== "HEAD" },
    ),
  );
});

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
