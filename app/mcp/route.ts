import { mcpMethodsNotAllowed, mcpPreflight, mcpRoute } from "@/lib/mcp/mcp-route.ts";
import { ENGRAM_TOOLS } from "@/lib/mcp/mcp-tools.ts";

// POST /mcp — MCP Streamable HTTP (stateless, JSON responses): the engram_* tools
export const POST = mcpRoute("/mcp", ENGRAM_TOOLS);

export const OPTIONS = mcpPreflight;
export const { GET, PUT, PATCH, DELETE } = mcpMethodsNotAllowed();
