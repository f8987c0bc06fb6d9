// The bridge's end of an MCP App, in the person's browser. The protocol itself is the ext-apps host SDK's
// (`AppBridge`, bundled in app-bridge.js); this file only connects it to the bridge: it loads the view, starts the
// sandbox on its own origin, delivers the tool's input and result, and hands every request the app makes to the
// bridge over this page's own origin (/app/<token>/rpc), where the bridge decides what happens.
import { AppBridge, PostMessageTransport } from "./app-bridge.js";

const base = location.pathname.replace(/\/+$/, "");
const status = document.getElementById("status");
const frame = document.getElementById("app");
const links = document.getElementById("links");
const MAX_HEIGHT = 6000;

function say(text, error = false) {
  status.textContent = text;
  status.classList.toggle("error", error);
}

async function rpc(method, params) {
  const response = await fetch(base + "/rpc", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ method, params: params ?? {} }),
    credentials: "same-origin",
  });
  const body = await response.json().catch(() => ({ error: { message: "The bridge did not answer." } }));
  if (!response.ok || body.error) throw new Error(body.error?.message ?? `The bridge answered ${response.status}.`);
  return body.result;
}

function showLink(shown) {
  // A link the app asked to open: shown with the host it really goes to, opened only by the person's own tap, in
  // another tab. This page never navigates away for an app.
  const box = document.createElement("div");
  box.className = "link";
  const head = document.createElement("p");
  head.textContent = `The app asks to open a link to ${shown.host}`;
  const full = document.createElement("p");
  full.textContent = shown.url;
  box.append(head, full);
  if (shown.warning) {
    const warn = document.createElement("p");
    warn.textContent = `Check it: ${shown.warning}`;
    box.append(warn);
  }
  if (shown.href) {
    const a = document.createElement("a");
    a.href = shown.href;
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    a.textContent = `Open ${shown.host}`;
    box.append(a);
  }
  links.prepend(box);
}

function hostContext(view) {
  const dark = window.matchMedia?.("(prefers-color-scheme: dark)").matches;
  return {
    toolInfo: { tool: view.tool },
    theme: dark ? "dark" : "light",
    displayMode: "inline",
    availableDisplayModes: ["inline", "fullscreen"],
    containerDimensions: { maxWidth: frame.clientWidth, maxHeight: MAX_HEIGHT },
    locale: navigator.language,
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    userAgent: "mcp-chat-bridge",
    platform: window.matchMedia?.("(pointer: coarse)").matches ? "mobile" : "web",
    deviceCapabilities: { touch: "ontouchstart" in window, hover: window.matchMedia?.("(hover: hover)").matches },
  };
}

let bridge = null;
let closed = false;

async function teardown(reason) {
  if (!bridge || closed) return;
  closed = true;
  try {
    await Promise.race([bridge.teardownResource({}), new Promise((done) => setTimeout(done, 2000))]);
  } catch {
    // The app may be gone already; the page closes anyway.
  }
  frame.remove();
  say(reason);
}

async function start() {
  const response = await fetch(base + "/view", { credentials: "same-origin" });
  const view = await response.json().catch(() => null);
  if (!response.ok || !view || view.error) {
    say(view?.error?.message ?? "The app could not be loaded.", true);
    return;
  }
  const ready = new Promise((resolve) => {
    window.addEventListener("message", function proxyReady(event) {
      if (event.source === frame.contentWindow && event.data?.method === "ui/notifications/sandbox-proxy-ready") {
        window.removeEventListener("message", proxyReady);
        resolve();
      }
    });
  });
  frame.src = view.sandbox;
  await ready;

  bridge = new AppBridge(null, view.host, {
    openLinks: {},
    serverTools: {},
    serverResources: {},
    logging: {},
    message: { text: {} },
  }, { hostContext: hostContext(view) });
  bridge.oncalltool = (params) => rpc("tools/call", params);
  bridge.onreadresource = (params) => rpc("resources/read", params);
  bridge.onmessage = async (params) => {
    try {
      await rpc("ui/message", params);
      return {};
    } catch (error) {
      say(error.message, true);
      return { isError: true };
    }
  };
  bridge.onopenlink = async (params) => {
    const shown = await rpc("ui/open-link", params);
    showLink(shown);
    return shown.href ? {} : { isError: true };
  };
  bridge.onrequestdisplaymode = async ({ mode }) => {
    const chosen = mode === "fullscreen" ? "fullscreen" : "inline";
    document.body.classList.toggle("fullscreen", chosen === "fullscreen");
    return { mode: chosen };
  };
  bridge.onsizechange = ({ width, height }) => {
    if (typeof height === "number" && height > 0) frame.style.height = `${Math.min(Math.ceil(height), MAX_HEIGHT)}px`;
    if (typeof width === "number" && width > 0) frame.style.minWidth = `min(${Math.ceil(width)}px, 100%)`;
  };
  bridge.onrequestteardown = () => { teardown("The app closed itself. You can close this page."); };
  bridge.onloggingmessage = () => {};
  bridge.oninitialized = () => {
    say("");
    bridge.sendToolInput({ arguments: view.input });
    bridge.sendToolResult(view.result);
  };
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  await bridge.sendSandboxResourceReady({ html: view.html, csp: view.csp });
  say("Starting the app…");
}

document.getElementById("close").addEventListener("click", () => {
  teardown("The app is closed. You can close this page.");
});
window.addEventListener("pagehide", () => { teardown(""); });

start().catch((error) => say(`The app could not start: ${error.message}`, true));
