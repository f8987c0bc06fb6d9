// What bridge/web/apps/web/app-bridge.js holds: the host end of MCP Apps from the ext-apps SDK (scripts/build_app_bridge.sh).
export { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
