import { MCP_PATHS, resourceFor } from "./public-origin.ts";

export const OAUTH_SCOPES = ["read", "write"] as const;

/** RFC 8414 authorization server metadata. */
export function authorizationServerMetadata(origin: string) {
  return {
    issuer: origin,
    authorization_endpoint: `${origin}/oauth/authorize`,
    token_endpoint: `${origin}/oauth/token`,
    registration_endpoint: `${origin}/oauth/register`,
    revocation_endpoint: `${origin}/oauth/revoke`,
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: ["authorization_code", "refresh_token"],
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: ["none"],
    revocation_endpoint_auth_methods_supported: ["none"],
    scopes_supported: [...OAUTH_SCOPES],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
  };
}

/** RFC 9728 protected resource metadata of one MCP endpoint. */
export function protectedResourceMetadata(origin: string, path: string) {
  return {
    resource: resourceFor(origin, path),
    authorization_servers: [origin],
    scopes_supported: [...OAUTH_SCOPES],
    bearer_methods_supported: ["header"],
    resource_name: path === "/mcp" ? "Engram" : "Engram (ChatGPT)",
  };
}

/** The resources tokens can be issued for. */
export function knownResources(origin: string): string[] {
  return MCP_PATHS.map((path) => resourceFor(origin, path));
}
