"""MCP Apps in chat: a tool result whose tool has an app (`_meta.ui.resourceUri`) gets an Open button, and each
person who presses it gets a one-time link to a page of the bridge that runs the app.

Chat messages cannot hold an iframe, so the app runs on the bridge's own web page, in a sandbox on a second origin
(`bridge.servers.apps_extension`), with the Content-Security-Policy the app's resource declares and nothing more. The
page speaks the protocol to the app with the `@modelcontextprotocol/ext-apps` host SDK (`web/app-bridge.js`, built
reproducibly by scripts/build_app_bridge.sh) and hands the app's requests to the bridge: its tool calls run as calls
typed in chat do (the approval rules, grants and quorum; an approval card in the conversation), its messages are
posted in the conversation labelled with the server, its links are shown with their real host.

`meta` reads what a tool and a resource say about apps, `csp` builds the sandbox's policy, `links` the per-person
tokens, `views` the apps offered in chat, `page` the HTML, and `routes` serves them on the bridge's HTTP server.

May use: `bridge.cards` (the outbound chat ports), `bridge.servers`, `bridge.config`, `bridge.web`, `bridge.safety`,
`bridge.text`, `bridge.door.model`, `bridge.errors` and libraries. The tool calls an app makes reach the core through
`routes.AppDoor` (the host).
"""
