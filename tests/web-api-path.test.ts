import { describe, expect, it } from "vitest";
import { apiPath } from "@/lib/web/api.ts";

// The dashboard's API paths: an id from the page's address is one path segment, whatever it holds.

describe("apiPath", () => {
  it("leaves plain ids as they are", () => {
    const hubId = "0196a2c4-7d1e-7a3b-9c2d-1e2f3a4b5c6d";
    expect(apiPath`/v1/hubs/${hubId}/members/${"u1"}`).toBe(`/v1/hubs/${hubId}/members/u1`);
    expect(apiPath`/v1/hubs/${"team"}`).toBe("/v1/hubs/team");
  });

  it("keeps a crafted id in its segment: no other path, query or fragment", () => {
    expect(apiPath`/v1/hubs/${"x/../../memories"}/invites`).toBe("/v1/hubs/x%2F..%2F..%2Fmemories/invites");
    expect(apiPath`/v1/hubs/${"x?limit=1#y"}/mail`).toBe("/v1/hubs/x%3Flimit%3D1%23y/mail");
    // As the browser resolves it: the request still goes to the hub's own route.
    expect(new URL(apiPath`/v1/hubs/${"x/../../auth/api-keys"}/invites`, "http://engram.test").pathname).toBe("/v1/hubs/x%2F..%2F..%2Fauth%2Fapi-keys/invites");
  });
});
