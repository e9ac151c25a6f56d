import { z } from "zod";
import type { RequestContext } from "@/lib/api/context.ts";
import { asCliGrantError, CLI_CLIENT_ID } from "./cli-client.ts";
import { redeemCodeForTokens, type TokenResponse } from "./exchange-token.ts";

export const exchangeCliCodeBodySchema = z.object({ code: z.string().min(1).max(200) });

/**
 * POST /v1/auth/exchange: the CLI trades the code its loopback address received for a token
 * pair. Only the built-in CLI client's codes issued without PKCE are redeemed here; every other
 * code needs /oauth/token and its verifier.
 */
export async function exchangeCliCode(ctx: RequestContext, input: z.output<typeof exchangeCliCodeBodySchema>): Promise<TokenResponse> {
  return asCliGrantError(redeemCodeForTokens(ctx.db, input.code, CLI_CLIENT_ID, ctx.now(), { withoutPkce: true }));
}
