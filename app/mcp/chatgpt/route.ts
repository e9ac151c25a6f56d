import { mcpMethodsNotAllowed, mcpPreflight, mcpRoute } from "@/lib/mcp/mcp-route.ts";
import { CHATGPT_TOOLS } from "@/lib/mcp/mcp-tools.ts";

// POST /mcp/chatgpt — MCP for ChatGPT connectors and deep research: search, fetch and plain-named tools
export const POST = mcpRoute("/mcp/chatgpt", CHATGPT_TOOLS);

export const OPTIONS = mcpPreflight;
export const { GET, PUT, PATCH, DELETE } = mcpMethodsNotAllowed();
