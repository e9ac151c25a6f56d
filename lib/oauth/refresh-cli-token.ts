import { z } from "zod";
import type { RequestContext } from "@/lib/api/context.ts";
import { asCliGrantError, CLI_CLIENT_ID } from "./cli-client.ts";
import { refreshGrantTokens, type TokenResponse } from "./exchange-token.ts";

export const refreshCliTokenBodySchema = z.object({ refresh_token: z.string().min(1).max(200) });

/** POST /v1/auth/refresh: a new pair for the CLI's refresh token, which works once (a replay ends the sign-in). */
export async function refreshCliToken(ctx: RequestContext, input: z.output<typeof refreshCliTokenBodySchema>): Promise<TokenResponse> {
  return asCliGrantError(refreshGrantTokens(ctx.db, input.refresh_token, CLI_CLIENT_ID, ctx.now()));
}
