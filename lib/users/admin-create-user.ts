import { z } from "zod";
import type { RequestContext } from "@/lib/api/context.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { createUser } from "./create-user.ts";
import { userNameSchema } from "./user-name.ts";

export const adminCreateUserBodySchema = z.strictObject({
  email: z.email().max(254),
  name: userNameSchema,
});

/** Bootstrap: a user, their personal hub and a first API key, for operators and automation. */
export async function adminCreateUser(ctx: RequestContext, input: z.output<typeof adminCreateUserBodySchema>) {
  const now = ctx.now();
  const { user, hub, extra } = await createUser(ctx.db, input, now, (tx, created) =>
    insertApiKey(tx, created.user.id, "bootstrap", now),
  );
  return { user: { id: user.id, email: user.email, name: user.name }, api_key: extra.key, personal_hub_id: hub.id };
}
