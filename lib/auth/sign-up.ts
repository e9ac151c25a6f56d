import { z } from "zod";
import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { userNameSchema } from "@/lib/users/user-name.ts";
import { hashPassword, MAX_PASSWORD_BYTES, MIN_PASSWORD_LENGTH } from "./password.ts";

export const signUpBodySchema = z.strictObject({
  email: z.email().max(254),
  name: userNameSchema,
  password: z
    .string()
    .min(MIN_PASSWORD_LENGTH, `password must be at least ${MIN_PASSWORD_LENGTH} characters`)
    .refine((value) => Buffer.byteLength(value, "utf8") <= MAX_PASSWORD_BYTES, `password must be at most ${MAX_PASSWORD_BYTES} bytes`),
});

/** Open on a fresh install; ENGRAM_ALLOW_SIGNUP=false closes it (admins then create users). */
export function signUpOpen(): boolean {
  const raw = process.env.ENGRAM_ALLOW_SIGNUP?.trim().toLowerCase();
  return !(raw === "false" || raw === "0" || raw === "no" || raw === "off");
}

/** Creates an email + password account and its personal hub. */
export async function signUp(ctx: RequestContext, input: z.output<typeof signUpBodySchema>) {
  if (!signUpOpen()) throw new ApiError("forbidden", "Sign-up is closed on this instance; ask an administrator for an account");
  const passwordHash = await hashPassword(input.password);
  // Nothing here proves the address: the account is claimed by whoever proves it first (claim-account.ts).
  const { user, hub } = await createUser(ctx.db, { email: input.email, name: input.name, passwordHash, emailUnverified: true }, ctx.now());
  return { user: { id: user.id, email: user.email, name: user.name }, personal_hub_id: hub.id };
}
