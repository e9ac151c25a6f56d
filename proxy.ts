import { NextResponse, type NextRequest } from "next/server";
import { pageNonce, pagePolicy } from "@/lib/web/content-security-policy.ts";

// Every dashboard page gets a script policy with a fresh nonce (lib/web/content-security-policy.ts).
export function proxy(request: NextRequest): NextResponse {
  const policy = pagePolicy(pageNonce());
  const headers = new Headers(request.headers);
  headers.set("content-security-policy", policy);
  const response = NextResponse.next({ request: { headers } });
  response.headers.set("content-security-policy", policy);
  return response;
}

// Pages only: the API, OAuth, MCP and auth endpoints answer JSON or set their own policy (the consent
// page, file downloads), and static chunks need none. Router prefetches render no scripts to allow.
export const config = {
  matcher: [
    {
      source: "/((?!v1(?:/|$)|api/|mcp(?:/|$)|oauth/|\\.well-known/|_next/static/|_next/image|favicon\\.ico).*)",
      missing: [
        { type: "header", key: "next-router-prefetch" },
        { type: "header", key: "purpose", value: "prefetch" },
      ],
    },
  ],
};
