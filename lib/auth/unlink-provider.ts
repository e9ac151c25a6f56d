import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";

export const SIGN_IN_PROVIDERS = ["github", "google"] as const;

/**
 * DELETE /v1/auth/link/{provider}: the caller's accounts at that provider no longer sign them in.
 * Never the last way in: without a password and another provider it is a 409. Two unlinks at once
 * are serialised per user, so they cannot each leave the other as the last one and remove both.
 */
export async function unlinkProvider(ctx: AuthContext, provider: string): Promise<{ status: "unlinked" }> {
  if (!(SIGN_IN_PROVIDERS as readonly string[]).includes(provider)) {
    throw new ApiError("invalid_request", `provider must be one of ${SIGN_IN_PROVIDERS.join(", ")}`, { issues: [{ path: "provider", message: "unknown provider" }] });
  }
  await ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, [`user:${ctx.user.id}:sign-in`]);
    const [user, identities] = await Promise.all([
      tx.user.findUniqueOrThrow({ where: { id: ctx.user.id }, select: { passwordHash: true } }),
      tx.oAuthAccount.findMany({ where: { userId: ctx.user.id }, select: { provider: true } }),
    ]);
    if (!identities.some((identity) => identity.provider === provider)) throw new ApiError("not_found", `No ${provider} account is linked`);
    if (!user.passwordHash && identities.every((identity) => identity.provider === provider)) {
      throw new ApiError("conflict", `${provider} is your only way to sign in; set a password or link another provider first`);
    }
    await tx.oAuthAccount.deleteMany({ where: { userId: ctx.user.id, provider } });
  });
  return { status: "unlinked" };
}
