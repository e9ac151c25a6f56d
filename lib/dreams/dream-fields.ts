import { z } from "zod";
import { cursorSchema } from "@/lib/api/pagination.ts";
import { normalizeId } from "@/lib/ids.ts";

/** GET /v1/dreams: hub_id narrows to one hub; limit and cursor page. */
export const listDreamsQuerySchema = z.object({ hub_id: z.string().max(200).overwrite(normalizeId).optional(), limit: z.string().optional(), cursor: cursorSchema.optional() });

/** GET /v1/dreams/{id}/actions: limit, cursor and optional filters. */
export const listDreamActionsQuerySchema = z.object({
  limit: z.string().optional(),
  cursor: cursorSchema.optional(),
  type: z.enum(["merge", "contradiction", "archive", "organize"]).optional(),
  state: z.enum(["applied", "undone", "pending_review", "resolved"]).optional(),
});
